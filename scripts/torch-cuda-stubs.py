#!/usr/bin/env python3
"""Makes empty stand-ins for the CUDA libraries that PyPI's torch wheel links against.

Usage: scripts/torch-cuda-stubs.py TORCH_PACKAGE_DIR OUT_DIR

PyPI's Linux torch wheel is a CUDA build: torch/_C and torch/lib/*.so name libcudart, libcublas,
libcudnn, libnccl, ... (DT_NEEDED), which come from several GB of nvidia-* wheels. To use torch on
the CPU only (scripts/install-deps.sh --torch2, for torch.distributed.checkpoint), this writes
one small shared library per such name into OUT_DIR (a folder in the wheel's RPATH, searched
before the system's), defining every symbol torch takes from outside its own libraries and the
system's, in the symbol versions torch asks for. Each function returns 100 (cudaErrorNoDevice,
CUDA_ERROR_NO_DEVICE), so torch sees no GPU: torch.cuda.is_available() is False. Nothing here
runs a CUDA call; a GPU run needs the real libraries (install torch with its dependencies).
Needs readelf (binutils) and cc.
"""
import glob
import os
import re
import subprocess
import sys

SYSTEM_DIRS = ["/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"]


def readelf(*args):
    return subprocess.run(["readelf", "-W", *args], check=True, capture_output=True, text=True).stdout


def main():
    torch_dir, out = sys.argv[1], sys.argv[2]
    objs = sorted(glob.glob(os.path.join(torch_dir, "lib", "*.so*")) + glob.glob(os.path.join(torch_dir, "_C*.so")))
    own = {os.path.basename(p) for p in objs}

    # sonames to stand in for: needed, not torch's own, not a system library (libc, libstdc++, ...)
    stubs = {}  # soname -> {symbol: (version or None, is_object)}
    needed = set()
    for p in objs:
        needed |= set(re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", readelf("-d", p)))
    for name in sorted(needed - own):
        if not any(os.path.exists(os.path.join(d, name)) for d in SYSTEM_DIRS):
            stubs[name] = {}

    # symbols everybody else defines: torch's libraries and the system libraries they link
    defined = set()
    for p in objs + [os.path.join(d, n) for n in needed - set(stubs) - own for d in SYSTEM_DIRS[:2]]:
        if os.path.exists(p):
            for line in readelf("--dyn-syms", p).splitlines():
                f = line.split()
                if len(f) >= 8 and f[6] != "UND":
                    defined.add(f[7].split("@")[0])

    for p in objs:
        # version name -> the file that must define it (".gnu.version_r": File: X / Name: V)
        ver_file, cur = {}, None
        for line in readelf("-V", p).splitlines():
            m = re.search(r"File: (\S+)", line)
            if m:
                cur = m.group(1)
            m = re.search(r"Name: (\S+)\s+Flags", line)
            if m and cur:
                ver_file[m.group(1)] = cur
        for line in readelf("--dyn-syms", p).splitlines():
            f = line.split()
            if len(f) < 8 or f[6] != "UND" or f[4] == "WEAK" or not f[7]:
                continue
            name, _, ver = f[7].partition("@")
            ver = ver.split()[0].lstrip("@") if ver else None
            is_obj = f[3] in ("OBJECT", "TLS")
            if ver and ver_file.get(ver) in stubs:
                stubs[ver_file[ver]][name] = (ver, is_obj)
            elif not ver and name not in defined and not name.startswith(("Py", "_Py")):
                for s in stubs.values():  # unversioned: whichever stub comes first provides it
                    s.setdefault(name, (None, is_obj))

    os.makedirs(out, exist_ok=True)
    for soname, syms in sorted(stubs.items()):
        base = os.path.join(out, soname)
        vers = sorted({v for v, _ in syms.values() if v})
        with open(base + ".c", "w") as c:
            for name, (_, is_obj) in sorted(syms.items()):
                c.write(f"char {name}[256];\n" if is_obj else f"long {name}(void) {{ return 100; }}\n")
        cmd = ["cc", "-shared", "-fPIC", "-O0", "-w", "-o", base, base + ".c", "-Wl,-soname," + soname]
        if vers:
            with open(base + ".map", "w") as m:
                for v in vers:  # each version node lists its symbols; the rest go with the first
                    names = [n for n, (sv, _) in sorted(syms.items()) if sv == v or (sv is None and v == vers[0])]
                    m.write(f"{v} {{ global: {' '.join(n + ';' for n in names)} }};\n")
            cmd.append("-Wl,--version-script=" + base + ".map")
        subprocess.run(cmd, check=True)
        for ext in (".c", ".map"):
            if os.path.exists(base + ext):
                os.remove(base + ext)
        print(f"torch-cuda-stubs: {soname}: {len(syms)} symbols" + (f", versions {' '.join(vers)}" if vers else ""))


if __name__ == "__main__":
    main()
