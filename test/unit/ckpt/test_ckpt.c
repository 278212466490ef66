/* PyTorch checkpoint files (torchfmt/): the object model, the pickle writer against bytes that
 * Python 3.11 and torch 1.13 wrote for the same objects, the reader on protocols 2-5, save/load
 * round trips of every kind and dtype (plain, copied, zip64), the zip layout torch expects, and
 * corrupt input: CRC mismatches naming the record, truncation, garbage pickles, self-reference,
 * deep nesting, and a fuzz loop of random byte flips that must never crash (run it under
 * `make SANITIZE=1`). test/integration/test_ckpt_torch.sh checks the files against torch. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "torchfmt/pickle.h"
#include "torchfmt/pyobj.h"
#include "torchfmt/torch_save.h"
#include "torchfmt/torchzip.h"

/* ---- reference bytes from Python (generated once; the objects are rebuilt below) ------------- */

/* pickle.dumps(small, protocol=2), Python 3.11 (see test_python_bytes) */
static const uint8_t PY_SMALL[] = {
    0x80, 0x02, 0x7d, 0x71, 0x00, 0x28, 0x58, 0x04, 0x00, 0x00, 0x00, 0x69, 0x6e, 0x74, 0x73, 0x71,
    0x01, 0x5d, 0x71, 0x02, 0x28, 0x4b, 0x00, 0x4b, 0xff, 0x4d, 0x00, 0x01, 0x4d, 0xff, 0xff, 0x4a,
    0x00, 0x00, 0x01, 0x00, 0x4a, 0xff, 0xff, 0xff, 0xff, 0x8a, 0x05, 0x00, 0x00, 0x00, 0x80, 0x00,
    0x8a, 0x05, 0xff, 0xff, 0xff, 0x7f, 0xff, 0x8a, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x80, 0x8a, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0x4a, 0x00, 0x00, 0x00, 0x80,
    0x4a, 0xff, 0xff, 0xff, 0x7f, 0x4a, 0x7f, 0xff, 0xff, 0xff, 0x65, 0x58, 0x01, 0x00, 0x00, 0x00,
    0x66, 0x71, 0x03, 0x47, 0x3f, 0xf8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x58, 0x01, 0x00, 0x00,
    0x00, 0x62, 0x71, 0x04, 0x63, 0x5f, 0x63, 0x6f, 0x64, 0x65, 0x63, 0x73, 0x0a, 0x65, 0x6e, 0x63,
    0x6f, 0x64, 0x65, 0x0a, 0x71, 0x05, 0x58, 0x04, 0x00, 0x00, 0x00, 0x00, 0xc3, 0xbf, 0x7f, 0x71,
    0x06, 0x58, 0x06, 0x00, 0x00, 0x00, 0x6c, 0x61, 0x74, 0x69, 0x6e, 0x31, 0x71, 0x07, 0x86, 0x71,
    0x08, 0x52, 0x71, 0x09, 0x58, 0x01, 0x00, 0x00, 0x00, 0x65, 0x71, 0x0a, 0x63, 0x5f, 0x5f, 0x62,
    0x75, 0x69, 0x6c, 0x74, 0x69, 0x6e, 0x5f, 0x5f, 0x0a, 0x62, 0x79, 0x74, 0x65, 0x73, 0x0a, 0x71,
    0x0b, 0x29, 0x52, 0x71, 0x0c, 0x58, 0x01, 0x00, 0x00, 0x00, 0x74, 0x71, 0x0d, 0x28, 0x4b, 0x01,
    0x4b, 0x02, 0x4b, 0x03, 0x86, 0x71, 0x0e, 0x29, 0x28, 0x4b, 0x04, 0x4b, 0x05, 0x4b, 0x06, 0x4b,
    0x07, 0x74, 0x71, 0x0f, 0x74, 0x71, 0x10, 0x58, 0x01, 0x00, 0x00, 0x00, 0x6e, 0x71, 0x11, 0x4e,
    0x58, 0x03, 0x00, 0x00, 0x00, 0x79, 0x65, 0x73, 0x71, 0x12, 0x88, 0x58, 0x02, 0x00, 0x00, 0x00,
    0x6e, 0x6f, 0x71, 0x13, 0x89, 0x58, 0x02, 0x00, 0x00, 0x00, 0x6e, 0x73, 0x71, 0x14, 0x63, 0x61,
    0x72, 0x67, 0x70, 0x61, 0x72, 0x73, 0x65, 0x0a, 0x4e, 0x61, 0x6d, 0x65, 0x73, 0x70, 0x61, 0x63,
    0x65, 0x0a, 0x71, 0x15, 0x29, 0x81, 0x71, 0x16, 0x7d, 0x71, 0x17, 0x58, 0x05, 0x00, 0x00, 0x00,
    0x61, 0x6c, 0x70, 0x68, 0x61, 0x71, 0x18, 0x4b, 0x01, 0x73, 0x62, 0x58, 0x02, 0x00, 0x00, 0x00,
    0x6f, 0x64, 0x71, 0x19, 0x63, 0x63, 0x6f, 0x6c, 0x6c, 0x65, 0x63, 0x74, 0x69, 0x6f, 0x6e, 0x73,
    0x0a, 0x4f, 0x72, 0x64, 0x65, 0x72, 0x65, 0x64, 0x44, 0x69, 0x63, 0x74, 0x0a, 0x71, 0x1a, 0x29,
    0x52, 0x71, 0x1b, 0x58, 0x01, 0x00, 0x00, 0x00, 0x78, 0x71, 0x1c, 0x47, 0x3f, 0xf0, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x73, 0x58, 0x02, 0x00, 0x00, 0x00, 0x6c, 0x31, 0x71, 0x1d, 0x5d, 0x71,
    0x1e, 0x4b, 0x07, 0x61, 0x58, 0x02, 0x00, 0x00, 0x00, 0x64, 0x32, 0x71, 0x1f, 0x7d, 0x71, 0x20,
    0x28, 0x58, 0x01, 0x00, 0x00, 0x00, 0x70, 0x71, 0x21, 0x4b, 0x01, 0x58, 0x01, 0x00, 0x00, 0x00,
    0x71, 0x71, 0x22, 0x4b, 0x02, 0x75, 0x75, 0x2e,
};

/* data.pkl of torch.save(obj), torch 1.13 (see test_torch_bytes) */
static const uint8_t TORCH_TENSORS[] = {
    0x80, 0x02, 0x7d, 0x71, 0x00, 0x28, 0x58, 0x01, 0x00, 0x00, 0x00, 0x77, 0x71, 0x01, 0x63, 0x74,
    0x6f, 0x72, 0x63, 0x68, 0x2e, 0x5f, 0x75, 0x74, 0x69, 0x6c, 0x73, 0x0a, 0x5f, 0x72, 0x65, 0x62,
    0x75, 0x69, 0x6c, 0x64, 0x5f, 0x74, 0x65, 0x6e, 0x73, 0x6f, 0x72, 0x5f, 0x76, 0x32, 0x0a, 0x71,
    0x02, 0x28, 0x28, 0x58, 0x07, 0x00, 0x00, 0x00, 0x73, 0x74, 0x6f, 0x72, 0x61, 0x67, 0x65, 0x71,
    0x03, 0x63, 0x74, 0x6f, 0x72, 0x63, 0x68, 0x0a, 0x46, 0x6c, 0x6f, 0x61, 0x74, 0x53, 0x74, 0x6f,
    0x72, 0x61, 0x67, 0x65, 0x0a, 0x71, 0x04, 0x58, 0x01, 0x00, 0x00, 0x00, 0x30, 0x71, 0x05, 0x58,
    0x03, 0x00, 0x00, 0x00, 0x63, 0x70, 0x75, 0x71, 0x06, 0x4b, 0x06, 0x74, 0x71, 0x07, 0x51, 0x4b,
    0x00, 0x4b, 0x02, 0x4b, 0x03, 0x86, 0x71, 0x08, 0x4b, 0x03, 0x4b, 0x01, 0x86, 0x71, 0x09, 0x89,
    0x63, 0x63, 0x6f, 0x6c, 0x6c, 0x65, 0x63, 0x74, 0x69, 0x6f, 0x6e, 0x73, 0x0a, 0x4f, 0x72, 0x64,
    0x65, 0x72, 0x65, 0x64, 0x44, 0x69, 0x63, 0x74, 0x0a, 0x71, 0x0a, 0x29, 0x52, 0x71, 0x0b, 0x74,
    0x71, 0x0c, 0x52, 0x71, 0x0d, 0x58, 0x02, 0x00, 0x00, 0x00, 0x77, 0x32, 0x71, 0x0e, 0x68, 0x0d,
    0x58, 0x01, 0x00, 0x00, 0x00, 0x76, 0x71, 0x0f, 0x68, 0x02, 0x28, 0x28, 0x68, 0x03, 0x68, 0x04,
    0x68, 0x05, 0x68, 0x06, 0x4b, 0x06, 0x74, 0x71, 0x10, 0x51, 0x4b, 0x01, 0x4b, 0x03, 0x85, 0x71,
    0x11, 0x4b, 0x02, 0x85, 0x71, 0x12, 0x89, 0x68, 0x0a, 0x29, 0x52, 0x71, 0x13, 0x74, 0x71, 0x14,
    0x52, 0x71, 0x15, 0x58, 0x01, 0x00, 0x00, 0x00, 0x68, 0x71, 0x16, 0x68, 0x02, 0x28, 0x28, 0x68,
    0x03, 0x63, 0x74, 0x6f, 0x72, 0x63, 0x68, 0x0a, 0x42, 0x46, 0x6c, 0x6f, 0x61, 0x74, 0x31, 0x36,
    0x53, 0x74, 0x6f, 0x72, 0x61, 0x67, 0x65, 0x0a, 0x71, 0x17, 0x58, 0x01, 0x00, 0x00, 0x00, 0x31,
    0x71, 0x18, 0x68, 0x06, 0x4b, 0x02, 0x74, 0x71, 0x19, 0x51, 0x4b, 0x00, 0x4b, 0x02, 0x85, 0x71,
    0x1a, 0x4b, 0x01, 0x85, 0x71, 0x1b, 0x89, 0x68, 0x0a, 0x29, 0x52, 0x71, 0x1c, 0x74, 0x71, 0x1d,
    0x52, 0x71, 0x1e, 0x75, 0x2e,
};

/* pickle.dumps(obj, protocol=N) for N = 2..5, Python 3.11 (see test_protocols) */
static const uint8_t PROTO2[] = {
    0x80, 0x02, 0x7d, 0x71, 0x00, 0x28, 0x58, 0x03, 0x00, 0x00, 0x00, 0x73, 0x65, 0x74, 0x71, 0x01,
    0x63, 0x5f, 0x5f, 0x62, 0x75, 0x69, 0x6c, 0x74, 0x69, 0x6e, 0x5f, 0x5f, 0x0a, 0x73, 0x65, 0x74,
    0x0a, 0x71, 0x02, 0x5d, 0x71, 0x03, 0x28, 0x4b, 0x01, 0x4b, 0x02, 0x65, 0x85, 0x71, 0x04, 0x52,
    0x71, 0x05, 0x58, 0x06, 0x00, 0x00, 0x00, 0x66, 0x72, 0x6f, 0x7a, 0x65, 0x6e, 0x71, 0x06, 0x63,
    0x5f, 0x5f, 0x62, 0x75, 0x69, 0x6c, 0x74, 0x69, 0x6e, 0x5f, 0x5f, 0x0a, 0x66, 0x72, 0x6f, 0x7a,
    0x65, 0x6e, 0x73, 0x65, 0x74, 0x0a, 0x71, 0x07, 0x5d, 0x71, 0x08, 0x4b, 0x03, 0x61, 0x85, 0x71,
    0x09, 0x52, 0x71, 0x0a, 0x58, 0x03, 0x00, 0x00, 0x00, 0x72, 0x61, 0x77, 0x71, 0x0b, 0x63, 0x5f,
    0x63, 0x6f, 0x64, 0x65, 0x63, 0x73, 0x0a, 0x65, 0x6e, 0x63, 0x6f, 0x64, 0x65, 0x0a, 0x71, 0x0c,
    0x58, 0x05, 0x00, 0x00, 0x00, 0x78, 0x79, 0x7a, 0xc2, 0x80, 0x71, 0x0d, 0x58, 0x06, 0x00, 0x00,
    0x00, 0x6c, 0x61, 0x74, 0x69, 0x6e, 0x31, 0x71, 0x0e, 0x86, 0x71, 0x0f, 0x52, 0x71, 0x10, 0x58,
    0x02, 0x00, 0x00, 0x00, 0x6e, 0x73, 0x71, 0x11, 0x63, 0x61, 0x72, 0x67, 0x70, 0x61, 0x72, 0x73,
    0x65, 0x0a, 0x4e, 0x61, 0x6d, 0x65, 0x73, 0x70, 0x61, 0x63, 0x65, 0x0a, 0x71, 0x12, 0x29, 0x81,
    0x71, 0x13, 0x7d, 0x71, 0x14, 0x28, 0x58, 0x05, 0x00, 0x00, 0x00, 0x61, 0x6c, 0x70, 0x68, 0x61,
    0x71, 0x15, 0x4b, 0x01, 0x58, 0x04, 0x00, 0x00, 0x00, 0x62, 0x65, 0x74, 0x61, 0x71, 0x16, 0x58,
    0x03, 0x00, 0x00, 0x00, 0x74, 0x77, 0x6f, 0x71, 0x17, 0x75, 0x62, 0x58, 0x02, 0x00, 0x00, 0x00,
    0x6f, 0x64, 0x71, 0x18, 0x63, 0x63, 0x6f, 0x6c, 0x6c, 0x65, 0x63, 0x74, 0x69, 0x6f, 0x6e, 0x73,
    0x0a, 0x4f, 0x72, 0x64, 0x65, 0x72, 0x65, 0x64, 0x44, 0x69, 0x63, 0x74, 0x0a, 0x71, 0x19, 0x29,
    0x52, 0x71, 0x1a, 0x58, 0x02, 0x00, 0x00, 0x00, 0x6b, 0x6b, 0x71, 0x1b, 0x4b, 0x02, 0x73, 0x58,
    0x03, 0x00, 0x00, 0x00, 0x75, 0x6e, 0x69, 0x71, 0x1c, 0x58, 0x02, 0x00, 0x00, 0x00, 0xc3, 0xbc,
    0x71, 0x1d, 0x58, 0x03, 0x00, 0x00, 0x00, 0x6c, 0x73, 0x74, 0x71, 0x1e, 0x5d, 0x71, 0x1f, 0x28,
    0x4b, 0x01, 0x5d, 0x71, 0x20, 0x4b, 0x02, 0x61, 0x65, 0x58, 0x03, 0x00, 0x00, 0x00, 0x74, 0x75,
    0x70, 0x71, 0x21, 0x28, 0x4b, 0x01, 0x4b, 0x02, 0x4b, 0x03, 0x4b, 0x04, 0x74, 0x71, 0x22, 0x58,
    0x03, 0x00, 0x00, 0x00, 0x62, 0x69, 0x67, 0x71, 0x23, 0x8a, 0x06, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xff, 0x58, 0x03, 0x00, 0x00, 0x00, 0x66, 0x6c, 0x74, 0x71, 0x24, 0x47, 0x3f, 0xd0, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x75, 0x2e,
};

static const uint8_t PROTO3[] = {
    0x80, 0x03, 0x7d, 0x71, 0x00, 0x28, 0x58, 0x03, 0x00, 0x00, 0x00, 0x73, 0x65, 0x74, 0x71, 0x01,
    0x63, 0x62, 0x75, 0x69, 0x6c, 0x74, 0x69, 0x6e, 0x73, 0x0a, 0x73, 0x65, 0x74, 0x0a, 0x71, 0x02,
    0x5d, 0x71, 0x03, 0x28, 0x4b, 0x01, 0x4b, 0x02, 0x65, 0x85, 0x71, 0x04, 0x52, 0x71, 0x05, 0x58,
    0x06, 0x00, 0x00, 0x00, 0x66, 0x72, 0x6f, 0x7a, 0x65, 0x6e, 0x71, 0x06, 0x63, 0x62, 0x75, 0x69,
    0x6c, 0x74, 0x69, 0x6e, 0x73, 0x0a, 0x66, 0x72, 0x6f, 0x7a, 0x65, 0x6e, 0x73, 0x65, 0x74, 0x0a,
    0x71, 0x07, 0x5d, 0x71, 0x08, 0x4b, 0x03, 0x61, 0x85, 0x71, 0x09, 0x52, 0x71, 0x0a, 0x58, 0x03,
    0x00, 0x00, 0x00, 0x72, 0x61, 0x77, 0x71, 0x0b, 0x43, 0x04, 0x78, 0x79, 0x7a, 0x80, 0x71, 0x0c,
    0x58, 0x02, 0x00, 0x00, 0x00, 0x6e, 0x73, 0x71, 0x0d, 0x63, 0x61, 0x72, 0x67, 0x70, 0x61, 0x72,
    0x73, 0x65, 0x0a, 0x4e, 0x61, 0x6d, 0x65, 0x73, 0x70, 0x61, 0x63, 0x65, 0x0a, 0x71, 0x0e, 0x29,
    0x81, 0x71, 0x0f, 0x7d, 0x71, 0x10, 0x28, 0x58, 0x05, 0x00, 0x00, 0x00, 0x61, 0x6c, 0x70, 0x68,
    0x61, 0x71, 0x11, 0x4b, 0x01, 0x58, 0x04, 0x00, 0x00, 0x00, 0x62, 0x65, 0x74, 0x61, 0x71, 0x12,
    0x58, 0x03, 0x00, 0x00, 0x00, 0x74, 0x77, 0x6f, 0x71, 0x13, 0x75, 0x62, 0x58, 0x02, 0x00, 0x00,
    0x00, 0x6f, 0x64, 0x71, 0x14, 0x63, 0x63, 0x6f, 0x6c, 0x6c, 0x65, 0x63, 0x74, 0x69, 0x6f, 0x6e,
    0x73, 0x0a, 0x4f, 0x72, 0x64, 0x65, 0x72, 0x65, 0x64, 0x44, 0x69, 0x63, 0x74, 0x0a, 0x71, 0x15,
    0x29, 0x52, 0x71, 0x16, 0x58, 0x02, 0x00, 0x00, 0x00, 0x6b, 0x6b, 0x71, 0x17, 0x4b, 0x02, 0x73,
    0x58, 0x03, 0x00, 0x00, 0x00, 0x75, 0x6e, 0x69, 0x71, 0x18, 0x58, 0x02, 0x00, 0x00, 0x00, 0xc3,
    0xbc, 0x71, 0x19, 0x58, 0x03, 0x00, 0x00, 0x00, 0x6c, 0x73, 0x74, 0x71, 0x1a, 0x5d, 0x71, 0x1b,
    0x28, 0x4b, 0x01, 0x5d, 0x71, 0x1c, 0x4b, 0x02, 0x61, 0x65, 0x58, 0x03, 0x00, 0x00, 0x00, 0x74,
    0x75, 0x70, 0x71, 0x1d, 0x28, 0x4b, 0x01, 0x4b, 0x02, 0x4b, 0x03, 0x4b, 0x04, 0x74, 0x71, 0x1e,
    0x58, 0x03, 0x00, 0x00, 0x00, 0x62, 0x69, 0x67, 0x71, 0x1f, 0x8a, 0x06, 0x00, 0x00, 0x00, 0x00,
    0x00, 0xff, 0x58, 0x03, 0x00, 0x00, 0x00, 0x66, 0x6c, 0x74, 0x71, 0x20, 0x47, 0x3f, 0xd0, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x75, 0x2e,
};

static const uint8_t PROTO4[] = {
    0x80, 0x04, 0x95, 0xe3, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x7d, 0x94, 0x28, 0x8c, 0x03,
    0x73, 0x65, 0x74, 0x94, 0x8f, 0x94, 0x28, 0x4b, 0x01, 0x4b, 0x02, 0x90, 0x8c, 0x06, 0x66, 0x72,
    0x6f, 0x7a, 0x65, 0x6e, 0x94, 0x28, 0x4b, 0x03, 0x91, 0x94, 0x8c, 0x03, 0x72, 0x61, 0x77, 0x94,
    0x43, 0x04, 0x78, 0x79, 0x7a, 0x80, 0x94, 0x8c, 0x02, 0x6e, 0x73, 0x94, 0x8c, 0x08, 0x61, 0x72,
    0x67, 0x70, 0x61, 0x72, 0x73, 0x65, 0x94, 0x8c, 0x09, 0x4e, 0x61, 0x6d, 0x65, 0x73, 0x70, 0x61,
    0x63, 0x65, 0x94, 0x93, 0x94, 0x29, 0x81, 0x94, 0x7d, 0x94, 0x28, 0x8c, 0x05, 0x61, 0x6c, 0x70,
    0x68, 0x61, 0x94, 0x4b, 0x01, 0x8c, 0x04, 0x62, 0x65, 0x74, 0x61, 0x94, 0x8c, 0x03, 0x74, 0x77,
    0x6f, 0x94, 0x75, 0x62, 0x8c, 0x02, 0x6f, 0x64, 0x94, 0x8c, 0x0b, 0x63, 0x6f, 0x6c, 0x6c, 0x65,
    0x63, 0x74, 0x69, 0x6f, 0x6e, 0x73, 0x94, 0x8c, 0x0b, 0x4f, 0x72, 0x64, 0x65, 0x72, 0x65, 0x64,
    0x44, 0x69, 0x63, 0x74, 0x94, 0x93, 0x94, 0x29, 0x52, 0x94, 0x8c, 0x02, 0x6b, 0x6b, 0x94, 0x4b,
    0x02, 0x73, 0x8c, 0x03, 0x75, 0x6e, 0x69, 0x94, 0x8c, 0x02, 0xc3, 0xbc, 0x94, 0x8c, 0x03, 0x6c,
    0x73, 0x74, 0x94, 0x5d, 0x94, 0x28, 0x4b, 0x01, 0x5d, 0x94, 0x4b, 0x02, 0x61, 0x65, 0x8c, 0x03,
    0x74, 0x75, 0x70, 0x94, 0x28, 0x4b, 0x01, 0x4b, 0x02, 0x4b, 0x03, 0x4b, 0x04, 0x74, 0x94, 0x8c,
    0x03, 0x62, 0x69, 0x67, 0x94, 0x8a, 0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0x8c, 0x03, 0x66,
    0x6c, 0x74, 0x94, 0x47, 0x3f, 0xd0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x75, 0x2e,
};

static const uint8_t PROTO5[] = {
    0x80, 0x05, 0x95, 0xe3, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x7d, 0x94, 0x28, 0x8c, 0x03,
    0x73, 0x65, 0x74, 0x94, 0x8f, 0x94, 0x28, 0x4b, 0x01, 0x4b, 0x02, 0x90, 0x8c, 0x06, 0x66, 0x72,
    0x6f, 0x7a, 0x65, 0x6e, 0x94, 0x28, 0x4b, 0x03, 0x91, 0x94, 0x8c, 0x03, 0x72, 0x61, 0x77, 0x94,
    0x43, 0x04, 0x78, 0x79, 0x7a, 0x80, 0x94, 0x8c, 0x02, 0x6e, 0x73, 0x94, 0x8c, 0x08, 0x61, 0x72,
    0x67, 0x70, 0x61, 0x72, 0x73, 0x65, 0x94, 0x8c, 0x09, 0x4e, 0x61, 0x6d, 0x65, 0x73, 0x70, 0x61,
    0x63, 0x65, 0x94, 0x93, 0x94, 0x29, 0x81, 0x94, 0x7d, 0x94, 0x28, 0x8c, 0x05, 0x61, 0x6c, 0x70,
    0x68, 0x61, 0x94, 0x4b, 0x01, 0x8c, 0x04, 0x62, 0x65, 0x74, 0x61, 0x94, 0x8c, 0x03, 0x74, 0x77,
    0x6f, 0x94, 0x75, 0x62, 0x8c, 0x02, 0x6f, 0x64, 0x94, 0x8c, 0x0b, 0x63, 0x6f, 0x6c, 0x6c, 0x65,
    0x63, 0x74, 0x69, 0x6f, 0x6e, 0x73, 0x94, 0x8c, 0x0b, 0x4f, 0x72, 0x64, 0x65, 0x72, 0x65, 0x64,
    0x44, 0x69, 0x63, 0x74, 0x94, 0x93, 0x94, 0x29, 0x52, 0x94, 0x8c, 0x02, 0x6b, 0x6b, 0x94, 0x4b,
    0x02, 0x73, 0x8c, 0x03, 0x75, 0x6e, 0x69, 0x94, 0x8c, 0x02, 0xc3, 0xbc, 0x94, 0x8c, 0x03, 0x6c,
    0x73, 0x74, 0x94, 0x5d, 0x94, 0x28, 0x4b, 0x01, 0x5d, 0x94, 0x4b, 0x02, 0x61, 0x65, 0x8c, 0x03,
    0x74, 0x75, 0x70, 0x94, 0x28, 0x4b, 0x01, 0x4b, 0x02, 0x4b, 0x03, 0x4b, 0x04, 0x74, 0x94, 0x8c,
    0x03, 0x62, 0x69, 0x67, 0x94, 0x8a, 0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0x8c, 0x03, 0x66,
    0x6c, 0x74, 0x94, 0x47, 0x3f, 0xd0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x75, 0x2e,
};

/* ---- helpers --------------------------------------------------------------------------------- */

#define OK(x) assert_int_equal((x), 0)
/* a string literal and its length (it may hold NULs) */
#define LIT(s) s, sizeof(s) - 1

static mc_pyobj_t *ints_list(const int64_t *v, size_t n)
{
    mc_pyobj_t *l = mc_py_list();
    for (size_t i = 0; i < n; i++) OK(mc_py_list_append(l, mc_py_int(v[i])));
    return l;
}

static mc_pyobj_t *f32_tensor(int ndim, const int64_t *shape, float start)
{
    mc_pyobj_t *t = mc_py_tensor_new(MC_TORCH_FLOAT32, ndim, shape);
    assert_non_null(t);
    float *p = mc_py_tensor_data(t);
    for (int64_t i = 0; i < mc_py_tensor_numel(t); i++) p[i] = start + (float)i;
    return t;
}

/* First differing byte, for a readable failure. */
static void expect_bytes(const uint8_t *got, size_t n, const uint8_t *want, size_t m)
{
    size_t i = 0;
    while (i < n && i < m && got[i] == want[i]) i++;
    if (i < n || i < m)
        print_error("bytes differ at %zu of %zu/%zu: got 0x%02x, want 0x%02x\n", i, n, m,
                    i < n ? got[i] : 0, i < m ? want[i] : 0);
    assert_int_equal(n, m);
    assert_memory_equal(got, want, n);
}

/* Saves obj into memory (the bytes are malloc'd). */
static uint8_t *save_mem(const mc_pyobj_t *obj, bool zip64, size_t *len)
{
    char *buf = NULL, err[512] = "";
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    assert_non_null(f);
    mc_torch_save_opts_t opts = {.force_zip64 = zip64};
    int rc = mc_torch_save_stream(f, obj, &opts, err, sizeof err);
    if (rc) print_error("%s\n", err);
    assert_int_equal(rc, 0);
    assert_int_equal(fclose(f), 0);
    *len = n;
    return (uint8_t *)buf;
}

/* Storages for mc_unpickle without an archive: key "i" is storages[i]. */
typedef struct {
    mc_pyobj_t *s[4];
    int n;
} fake_storages_t;

static mc_pyobj_t *fake_storage(void *ctx, const char *key, mc_torch_dtype_t dt, bool untyped,
                                int64_t numel, const char *location, char *err, size_t errn)
{
    fake_storages_t *fs = ctx;
    int i = atoi(key);
    if (i < 0 || i >= fs->n || fs->s[i]->storage.dtype != dt || fs->s[i]->storage.numel != numel) {
        snprintf(err, errn, "no storage %s", key);
        return NULL;
    }
    return mc_py_incref(fs->s[i]);
}

/* ---- object model ---------------------------------------------------------------------------- */

static void test_dicts_and_lookups(void **state)
{
    (void)state;
    char err[256];
    mc_pyobj_t *d = mc_py_dict();
    for (int i = 0; i < 3000; i++) { /* past the index threshold, with replacements */
        char k[16];
        snprintf(k, sizeof k, "key%d", i);
        OK(mc_py_dict_set_str(d, k, mc_py_int(i)));
        OK(mc_py_dict_set_int(d, i, mc_py_int(-i)));
    }
    OK(mc_py_dict_set_str(d, "key7", mc_py_str("seven"))); /* replaces in place */
    assert_int_equal(mc_py_len(d), 6000);
    assert_string_equal(mc_py_get_str(mc_py_dict_get_str(d, "key7")), "seven");
    int64_t v;
    OK(mc_py_get_int(mc_py_dict_get_int(d, 2999), &v));
    assert_int_equal(v, -2999);
    assert_null(mc_py_dict_get_str(d, "nope"));
    /* tuple and float keys hash by value */
    OK(mc_py_dict_set(d, mc_py_tuple(2, mc_py_int(1), mc_py_str("a")), mc_py_int(42)));
    OK(mc_py_dict_set(d, mc_py_float(-0.0), mc_py_int(43)));
    mc_pyobj_t *tk = mc_py_tuple(2, mc_py_int(1), mc_py_str("a")), *fk = mc_py_float(0.0);
    OK(mc_py_get_int(mc_py_dict_get(d, tk), &v));
    assert_int_equal(v, 42);
    OK(mc_py_get_int(mc_py_dict_get(d, fk), &v)); /* 0.0 == -0.0 */
    assert_int_equal(v, 43);
    OK(mc_py_dict_del(d, tk));
    assert_null(mc_py_dict_get(d, tk));
    assert_int_equal(mc_py_dict_del(d, tk), -1);
    assert_non_null(mc_py_dict_get_str(d, "key2999")); /* the index survives a delete */
    mc_py_decref(tk);
    mc_py_decref(fk);

    /* paths, typed access, messages */
    mc_pyobj_t *root = mc_py_dict(), *groups = mc_py_list(), *g = mc_py_dict(), *ns = mc_py_namespace();
    OK(mc_py_dict_set_str(g, "lr", mc_py_float(0.5)));
    OK(mc_py_list_append(groups, g));
    OK(mc_py_dict_set_str(root, "param_groups", groups));
    OK(mc_py_attr_set(ns, "num_layers", mc_py_int(24)));
    OK(mc_py_dict_set_str(root, "args", ns));
    OK(mc_py_dict_set_str(root, "iteration", mc_py_bool(true)));
    double lr;
    OK(mc_py_get_float(mc_py_path(root, "param_groups/0/lr"), &lr));
    assert_true(lr == 0.5);
    OK(mc_py_get_int(mc_py_path(root, "args/num_layers"), &v));
    assert_int_equal(v, 24);
    assert_non_null(mc_py_attr(ns, "num_layers"));
    assert_true(mc_py_is_a(ns, "argparse", "Namespace"));
    assert_null(mc_py_path(root, "param_groups/1/lr"));
    assert_null(mc_py_path(root, "param_groups/x"));
    assert_non_null(mc_py_want(root, "iteration", MC_PY_INT, err, sizeof err)); /* bool is an int */
    assert_null(mc_py_want(root, "iteration", MC_PY_STR, err, sizeof err));
    assert_string_equal(err, "'iteration' is a bool, not a str");
    assert_null(mc_py_want(root, "checkpoint_version", MC_PY_FLOAT, err, sizeof err));
    assert_string_equal(err, "no key 'checkpoint_version'");
    assert_null(mc_py_want(root, "args", MC_PY_INT, err, sizeof err));
    assert_string_equal(err, "'args' is an object, not an int");
    mc_py_decref(root);
    mc_py_decref(d);

    /* stealing: failures release what they were given (ASan's leak check sees the rest) */
    mc_pyobj_t *notlist = mc_py_int(1);
    assert_int_equal(mc_py_list_append(notlist, mc_py_str("x")), -1);
    assert_int_equal(mc_py_dict_set_str(notlist, "k", mc_py_str("x")), -1);
    assert_null(mc_py_tuple(3, mc_py_int(1), NULL, mc_py_int(3)));
    assert_null(mc_py_object(mc_py_global("m", "f"), mc_py_list(), false)); /* args not a tuple */
    mc_py_decref(notlist);
}

static void test_tensors(void **state)
{
    (void)state;
    char err[256];
    int64_t shape[] = {2, 3}, stride[] = {1, 2}, one[] = {1, 4};
    mc_pyobj_t *t = f32_tensor(2, shape, 0);
    assert_true(mc_py_tensor_contiguous(t));
    assert_int_equal(t->tensor.stride[0], 3);
    assert_int_equal(mc_py_tensor_nbytes(t), 24);
    mc_pyobj_t *s = t->tensor.storage;
    /* a transposed view is not contiguous; a size-1 dim's stride does not matter */
    mc_pyobj_t *tv = mc_py_tensor(mc_py_incref(s), MC_TORCH_FLOAT32, 0, 2, shape, stride);
    assert_non_null(tv);
    assert_false(mc_py_tensor_contiguous(tv));
    mc_pyobj_t *row = mc_py_tensor(mc_py_incref(s), MC_TORCH_FLOAT32, 2, 2, one, (int64_t[]){99, 1});
    assert_true(mc_py_tensor_contiguous(row));
    assert_true(*(float *)mc_py_tensor_data(row) == 2.0f);
    /* views that do not fit, and dtype confusion */
    assert_int_equal(mc_py_tensor_check(s, MC_TORCH_FLOAT32, 3, 2, shape, (int64_t[]){3, 1}, err, sizeof err), -1);
    assert_string_equal(err, "tensor view reaches element 8 of a storage of 6 float32 elements");
    assert_int_equal(mc_py_tensor_check(s, MC_TORCH_INT32, 0, 2, shape, (int64_t[]){3, 1}, err, sizeof err), -1);
    assert_string_equal(err, "a float32 storage viewed as int32");
    assert_int_equal(mc_py_tensor_check(s, MC_TORCH_FLOAT32, 0, 2, (int64_t[]){INT64_MAX, 2},
                                        (int64_t[]){INT64_MAX, 1}, err, sizeof err), -1);
    assert_int_equal(mc_py_tensor_check(s, MC_TORCH_FLOAT32, 6, 2, (int64_t[]){0, 3},
                                        (int64_t[]){3, 1}, err, sizeof err), 0); /* empty at the end */
    assert_null(mc_py_tensor(mc_py_incref(s), MC_TORCH_FLOAT32, 1, 2, shape, NULL));
    /* a wrapped tensor points at the caller's memory */
    float mine[4] = {1, 2, 3, 4};
    mc_pyobj_t *w = mc_py_tensor_wrap(MC_TORCH_FLOAT32, 2, (int64_t[]){2, 2}, mine);
    assert_ptr_equal(mc_py_tensor_data(w), mine);
    mc_torch_dtype_t dt;
    OK(mc_torch_dtype_from_name("half", &dt));
    assert_int_equal(dt, MC_TORCH_FLOAT16);
    assert_string_equal(mc_torch_dtype_name(MC_TORCH_BFLOAT16), "bfloat16");
    assert_int_equal(mc_torch_dtype_from_name("float128", &dt), -1);
    mc_py_decref(w);
    mc_py_decref(row);
    mc_py_decref(tv);
    mc_py_decref(t);
}

/* ---- the writer against Python's bytes ------------------------------------------------------- */

static mc_pyobj_t *py_small(void)
{
    static const int64_t INTS[] = {0, 255, 256, 65535, 65536, -1, 2147483648LL, -2147483649LL,
                                   INT64_MIN, INT64_MAX, -2147483648LL, 2147483647, -129};
    mc_pyobj_t *d = mc_py_dict(), *ns = mc_py_namespace(), *od = mc_py_ordered_dict(),
               *l1 = mc_py_list(), *d2 = mc_py_dict();
    OK(mc_py_dict_set_str(d, "ints", ints_list(INTS, sizeof INTS / sizeof *INTS)));
    OK(mc_py_dict_set_str(d, "f", mc_py_float(1.5)));
    OK(mc_py_dict_set_str(d, "b", mc_py_bytes("\x00\xff\x7f", 3)));
    OK(mc_py_dict_set_str(d, "e", mc_py_bytes("", 0)));
    OK(mc_py_dict_set_str(d, "t", mc_py_tuple(4, mc_py_int(1), mc_py_tuple(2, mc_py_int(2), mc_py_int(3)),
                                              mc_py_tuple(0),
                                              mc_py_tuple(4, mc_py_int(4), mc_py_int(5), mc_py_int(6),
                                                          mc_py_int(7)))));
    OK(mc_py_dict_set_str(d, "n", mc_py_none()));
    OK(mc_py_dict_set_str(d, "yes", mc_py_bool(true)));
    OK(mc_py_dict_set_str(d, "no", mc_py_bool(false)));
    OK(mc_py_attr_set(ns, "alpha", mc_py_int(1)));
    OK(mc_py_dict_set_str(d, "ns", ns));
    OK(mc_py_dict_set_str(od, "x", mc_py_float(1.0)));
    OK(mc_py_dict_set_str(d, "od", od));
    OK(mc_py_list_append(l1, mc_py_int(7)));
    OK(mc_py_dict_set_str(d, "l1", l1));
    OK(mc_py_dict_set_str(d2, "p", mc_py_int(1)));
    OK(mc_py_dict_set_str(d2, "q", mc_py_int(2)));
    OK(mc_py_dict_set_str(d, "d2", d2));
    return d;
}

static void test_python_bytes(void **state)
{
    (void)state;
    char err[256];
    /* pickle.dumps(argparse.Namespace(), protocol=2): no BUILD for an empty __dict__ */
    static const uint8_t EMPTY_NS[] = "\x80\x02" "cargparse\nNamespace\nq\x00)\x81q\x01.";
    mc_pyobj_t *ns = mc_py_namespace();
    uint8_t *b;
    size_t n;
    mc_pickle_storages_t none;
    OK(mc_pickle_dump(ns, &b, &n, &none, err, sizeof err));
    expect_bytes(b, n, EMPTY_NS, sizeof EMPTY_NS - 1);
    free(b);
    mc_py_decref(ns);

    mc_pyobj_t *obj = py_small(), *back;
    uint8_t *out;
    size_t len;
    mc_pickle_storages_t st;
    OK(mc_pickle_dump(obj, &out, &len, &st, err, sizeof err));
    expect_bytes(out, len, PY_SMALL, sizeof PY_SMALL);
    assert_int_equal(st.n, 0);
    OK(mc_unpickle(PY_SMALL, sizeof PY_SMALL, NULL, &back, err, sizeof err));
    assert_true(mc_py_equal(obj, back));
    free(out);
    mc_pickle_storages_free(&st);
    mc_py_decref(back);
    mc_py_decref(obj);
}

/* {'w': t, 'w2': t, 'v': t.view(-1)[1::2], 'h': bf16 [1, 2]}: tensors, a tensor met twice (a
 * BINGET), a view of the same storage (its key a BINGET), a second storage type. */
static void test_torch_bytes(void **state)
{
    (void)state;
    char err[256];
    int64_t s23[] = {2, 3}, s3[] = {3}, s2[] = {2};
    mc_pyobj_t *d = mc_py_dict(), *t = f32_tensor(2, s23, 0);
    mc_pyobj_t *h = mc_py_tensor_new(MC_TORCH_BFLOAT16, 1, s2);
    ((uint16_t *)mc_py_tensor_data(h))[0] = 0x3f80;
    ((uint16_t *)mc_py_tensor_data(h))[1] = 0x4000;
    OK(mc_py_dict_set_str(d, "w", mc_py_incref(t)));
    OK(mc_py_dict_set_str(d, "w2", mc_py_incref(t)));
    OK(mc_py_dict_set_str(d, "v", mc_py_tensor(mc_py_incref(t->tensor.storage), MC_TORCH_FLOAT32, 1, 1,
                                               s3, s2)));
    OK(mc_py_dict_set_str(d, "h", h));
    uint8_t *out;
    size_t len;
    mc_pickle_storages_t st;
    OK(mc_pickle_dump(d, &out, &len, &st, err, sizeof err));
    expect_bytes(out, len, TORCH_TENSORS, sizeof TORCH_TENSORS);
    assert_int_equal(st.n, 2);
    assert_ptr_equal(st.storages[0], t->tensor.storage);
    assert_ptr_equal(st.storages[1], h->tensor.storage);

    /* and back: the same tensor object twice, the view sharing its storage */
    fake_storages_t fs = {{t->tensor.storage, h->tensor.storage}, 2};
    mc_unpickle_storages_t us = {fake_storage, &fs};
    mc_pyobj_t *back;
    OK(mc_unpickle(TORCH_TENSORS, sizeof TORCH_TENSORS, &us, &back, err, sizeof err));
    assert_true(mc_py_equal(d, back));
    assert_ptr_equal(mc_py_dict_get_str(back, "w"), mc_py_dict_get_str(back, "w2"));
    mc_pyobj_t *v = mc_py_dict_get_str(back, "v");
    assert_ptr_equal(v->tensor.storage, t->tensor.storage);
    assert_int_equal(v->tensor.offset, 1);
    assert_true(((float *)mc_py_tensor_data(v))[2] == 3.0f); /* element 1 of the view */
    free(out);
    mc_pickle_storages_free(&st);
    mc_py_decref(back);
    mc_py_decref(t);
    mc_py_decref(d);
}

/* ---- the reader on Python's protocols 2..5 --------------------------------------------------- */

static void test_protocols(void **state)
{
    (void)state;
    char err[256];
    mc_pyobj_t *want = mc_py_dict(), *ns = mc_py_namespace(), *od = mc_py_ordered_dict();
    mc_pyobj_t *l12 = mc_py_list(), *l3 = mc_py_list(), *lst = mc_py_list(), *l2 = mc_py_list();
    OK(mc_py_list_append(l12, mc_py_int(1)));
    OK(mc_py_list_append(l12, mc_py_int(2)));
    OK(mc_py_list_append(l3, mc_py_int(3)));
    OK(mc_py_dict_set_str(want, "set", mc_py_object(mc_py_global("builtins", "set"), mc_py_tuple(1, l12), false)));
    OK(mc_py_dict_set_str(want, "frozen", mc_py_object(mc_py_global("builtins", "frozenset"),
                                                       mc_py_tuple(1, l3), false)));
    OK(mc_py_dict_set_str(want, "raw", mc_py_bytes("xyz\x80", 4)));
    OK(mc_py_attr_set(ns, "alpha", mc_py_int(1)));
    OK(mc_py_attr_set(ns, "beta", mc_py_str("two")));
    OK(mc_py_dict_set_str(want, "ns", ns));
    OK(mc_py_dict_set_str(od, "kk", mc_py_int(2)));
    OK(mc_py_dict_set_str(want, "od", od));
    OK(mc_py_dict_set_str(want, "uni", mc_py_str("\xc3\xbc")));
    OK(mc_py_list_append(l2, mc_py_int(2)));
    OK(mc_py_list_append(lst, mc_py_int(1)));
    OK(mc_py_list_append(lst, l2));
    OK(mc_py_dict_set_str(want, "lst", lst));
    OK(mc_py_dict_set_str(want, "tup", mc_py_tuple(4, mc_py_int(1), mc_py_int(2), mc_py_int(3), mc_py_int(4))));
    OK(mc_py_dict_set_str(want, "big", mc_py_int(-(1LL << 40))));
    OK(mc_py_dict_set_str(want, "flt", mc_py_float(0.25)));
    const struct { const uint8_t *p; size_t n; } cases[] = {
        {PROTO2, sizeof PROTO2}, {PROTO3, sizeof PROTO3}, {PROTO4, sizeof PROTO4}, {PROTO5, sizeof PROTO5}};
    for (int i = 0; i < 4; i++) {
        mc_pyobj_t *got;
        int rc = mc_unpickle(cases[i].p, cases[i].n, NULL, &got, err, sizeof err);
        if (rc) print_error("protocol %d: %s\n", i + 2, err);
        assert_int_equal(rc, 0);
        if (!mc_py_equal(want, got)) print_error("protocol %d differs\n", i + 2);
        assert_true(mc_py_equal(want, got));
        mc_py_decref(got);
    }
    mc_py_decref(want);
}

/* The reader's other torch forms: _rebuild_tensor_v3 over an untyped storage with the dtype as
 * a global (torch >= 2.3 for uint16/32/64 and float8), saved from CUDA; _rebuild_tensor (v1);
 * _rebuild_from_type_v2 of a Parameter (a tensor with Python attributes). */
#define PID(type, key, loc, numel) \
    "(X\x07\x00\x00\x00" "storage" "c" type "\nX\x01\x00\x00\x00" key "X" loc numel "tQ"
static void test_torch_variants(void **state)
{
    (void)state;
    static const char V3[] = "\x80\x02" "ctorch._utils\n_rebuild_tensor_v3\n("
        PID("torch.storage\nUntypedStorage", "0", "\x06\x00\x00\x00" "cuda:0", "K\x08")
        "K\x00K\x02\x85K\x01\x85\x89" "ccollections\nOrderedDict\n)R" "ctorch\nuint32\ntR.";
    static const char V1[] = "\x80\x02" "ctorch._utils\n_rebuild_tensor\n("
        PID("torch\nFloatStorage", "1", "\x03\x00\x00\x00" "cpu", "K\x02") "K\x00K\x02\x85K\x01\x85tR.";
    static const char FROM_TYPE[] = "\x80\x02" "ctorch._tensor\n_rebuild_from_type_v2\n("
        "ctorch._utils\n_rebuild_tensor_v2\n" "ctorch.nn.parameter\nParameter\n("
        PID("torch\nFloatStorage", "1", "\x03\x00\x00\x00" "cpu", "K\x02")
        "K\x00K\x02\x85K\x01\x85\x88" "ccollections\nOrderedDict\n)R" "t}tR.";
    static uint8_t bytes[8] = {1, 0, 0, 0, 2, 0, 0, 0};
    float floats[2] = {0.5f, -0.5f};
    fake_storages_t fs = {{mc_py_storage_owned_by(MC_TORCH_UINT8, true, bytes, 8, NULL, "cuda:0"),
                           mc_py_storage_wrap(MC_TORCH_FLOAT32, floats, 2)}, 2};
    mc_unpickle_storages_t us = {fake_storage, &fs};
    char err[256];
    mc_pyobj_t *t;
    OK(mc_unpickle(V3, sizeof V3 - 1, &us, &t, err, sizeof err));
    assert_int_equal(t->kind, MC_PY_TENSOR);
    assert_int_equal(t->tensor.dtype, MC_TORCH_UINT32);
    assert_int_equal(mc_py_tensor_numel(t), 2);
    assert_int_equal(((uint32_t *)mc_py_tensor_data(t))[1], 2);
    assert_string_equal(t->tensor.storage->storage.location, "cuda:0");
    uint8_t *out;
    size_t len;
    mc_pickle_storages_t st;
    assert_int_equal(mc_pickle_dump(t, &out, &len, &st, err, sizeof err), -1);
    assert_non_null(strstr(err, "cannot save a uint32 tensor"));
    mc_py_decref(t);
    OK(mc_unpickle(V1, sizeof V1 - 1, &us, &t, err, sizeof err));
    assert_true(t->kind == MC_PY_TENSOR && !t->tensor.parameter && !t->tensor.requires_grad);
    assert_true(((float *)mc_py_tensor_data(t))[1] == -0.5f);
    mc_py_decref(t);
    OK(mc_unpickle(FROM_TYPE, sizeof FROM_TYPE - 1, &us, &t, err, sizeof err));
    assert_true(t->kind == MC_PY_TENSOR && t->tensor.parameter && t->tensor.requires_grad);
    mc_py_decref(t);
    mc_py_decref(fs.s[0]);
    mc_py_decref(fs.s[1]);
}

/* ---- save/load round trips ------------------------------------------------------------------- */

/* Every kind and every dtype the writer emits, views sharing storages, a tensor met twice,
 * batching boundaries (1, 2, 1000, 1001, 2000 items), odd floats and strings. */
static mc_pyobj_t *everything(void)
{
    mc_pyobj_t *root = mc_py_dict(), *sd = mc_py_ordered_dict(), *md = mc_py_ordered_dict();
    static const mc_torch_dtype_t DTS[] = {MC_TORCH_FLOAT32, MC_TORCH_FLOAT64, MC_TORCH_FLOAT16,
                                           MC_TORCH_BFLOAT16, MC_TORCH_INT64, MC_TORCH_INT32,
                                           MC_TORCH_INT16, MC_TORCH_INT8, MC_TORCH_UINT8, MC_TORCH_BOOL,
                                           MC_TORCH_COMPLEX64, MC_TORCH_COMPLEX128};
    for (size_t i = 0; i < sizeof DTS / sizeof *DTS; i++) {
        int64_t shape[] = {3, 5};
        mc_pyobj_t *t = mc_py_tensor_new(DTS[i], 2, shape);
        uint8_t *p = mc_py_tensor_data(t);
        for (size_t k = 0; k < mc_py_tensor_nbytes(t); k++)
            p[k] = DTS[i] == MC_TORCH_BOOL ? (uint8_t)(k % 2) : (uint8_t)(k * 37 + i);
        char name[64];
        snprintf(name, sizeof name, "layers.%zu.%s", i, mc_torch_dtype_name(DTS[i]));
        OK(mc_py_dict_set_str(sd, name, t));
    }
    int64_t s6[] = {6}, s23[] = {2, 3}, s0[] = {0, 7}, big[] = {2, 2, 2, 2, 2};
    mc_pyobj_t *base = f32_tensor(1, s6, 10);
    OK(mc_py_dict_set_str(sd, "base", mc_py_incref(base)));
    OK(mc_py_dict_set_str(sd, "transposed", mc_py_tensor(mc_py_incref(base->tensor.storage), MC_TORCH_FLOAT32,
                                                         0, 2, (int64_t[]){3, 2}, (int64_t[]){1, 3})));
    OK(mc_py_dict_set_str(sd, "tail", mc_py_tensor(mc_py_incref(base->tensor.storage), MC_TORCH_FLOAT32, 4, 1,
                                                   (int64_t[]){2}, NULL)));
    OK(mc_py_dict_set_str(sd, "again", base)); /* the same tensor object twice */
    OK(mc_py_dict_set_str(sd, "empty", mc_py_tensor_new(MC_TORCH_FLOAT32, 2, s0)));
    OK(mc_py_dict_set_str(sd, "five_dims", f32_tensor(5, big, -3)));
    float sc = -0.0f;
    OK(mc_py_dict_set_str(sd, "scalar", mc_py_tensor_copy(MC_TORCH_FLOAT32, 0, NULL, &sc)));
    mc_pyobj_t *p = f32_tensor(2, s23, 1);
    p->tensor.parameter = p->tensor.requires_grad = true;
    OK(mc_py_dict_set_str(sd, "param", p));
    mc_pyobj_t *rg = f32_tensor(1, s6, 1);
    rg->tensor.requires_grad = true;
    OK(mc_py_dict_set_str(sd, "requires_grad", rg));
    mc_pyobj_t *ver = mc_py_dict();
    OK(mc_py_dict_set_str(ver, "version", mc_py_int(1)));
    OK(mc_py_dict_set_str(md, "", ver));
    OK(mc_py_attr_set(sd, "_metadata", md));
    OK(mc_py_dict_set_str(root, "model", sd));

    mc_pyobj_t *ns = mc_py_namespace();
    OK(mc_py_attr_set(ns, "lr", mc_py_float(3e-4)));
    OK(mc_py_attr_set(ns, "name", mc_py_strn("nul\0inside", 10)));
    OK(mc_py_attr_set(ns, "kinds", mc_py_tuple(3, mc_py_global("torch", "bfloat16"), mc_py_none(),
                                              mc_py_global("builtins", "set"))));
    OK(mc_py_dict_set_str(root, "args", ns));

    /* an opaque object with everything a reduce can carry */
    mc_pyobj_t *obj = mc_py_object(mc_py_global("some.module", "Thing"),
                                   mc_py_tuple(2, mc_py_int(1), mc_py_str("two")), false);
    obj->object.state = mc_py_tuple(2, mc_py_int(3), mc_py_bytes("\x01\x02", 2));
    obj->object.listitems = mc_py_list();
    for (int i = 0; i < 1001; i++) OK(mc_py_list_append(obj->object.listitems, mc_py_int(i)));
    obj->object.dictitems = mc_py_dict();
    OK(mc_py_dict_set_int(obj->object.dictitems, 5, mc_py_str("five")));
    OK(mc_py_dict_set_str(root, "thing", obj));

    uint8_t all[256];
    for (int i = 0; i < 256; i++) all[i] = (uint8_t)i;
    OK(mc_py_dict_set_str(root, "bytes", mc_py_bytes(all, 256)));
    OK(mc_py_dict_set_str(root, "no_bytes", mc_py_bytes("", 0)));
    OK(mc_py_dict_set_str(root, "floats", mc_py_tuple(5, mc_py_float(NAN), mc_py_float(-INFINITY),
                                                     mc_py_float(-0.0), mc_py_float(5e-324),
                                                     mc_py_float(1.7976931348623157e308))));
    OK(mc_py_dict_set_str(root, "", mc_py_str("")));
    mc_pyobj_t *keys = mc_py_dict();
    OK(mc_py_dict_set(keys, mc_py_int(-7), mc_py_str("int key")));
    OK(mc_py_dict_set(keys, mc_py_tuple(2, mc_py_int(1), mc_py_int(2)), mc_py_str("tuple key")));
    OK(mc_py_dict_set(keys, mc_py_none(), mc_py_str("None key")));
    OK(mc_py_dict_set_str(root, "keys", keys));
    mc_pyobj_t *lists = mc_py_list();
    for (int n = 0; n <= 2001; n += n < 3 ? 1 : 999) { /* 0 1 2 3 1002 2001 items */
        mc_pyobj_t *l = mc_py_list(), *d = mc_py_dict(), *od = mc_py_ordered_dict();
        for (int i = 0; i < n; i++) {
            OK(mc_py_list_append(l, mc_py_int(i)));
            OK(mc_py_dict_set_int(d, i, mc_py_int(i)));
            OK(mc_py_dict_set_int(od, i, mc_py_int(-i)));
        }
        OK(mc_py_list_append(lists, l));
        OK(mc_py_list_append(lists, d));
        OK(mc_py_list_append(lists, od));
    }
    for (int n = 1000; n <= 2000; n += 1000) { /* dicts of whole batches */
        mc_pyobj_t *d = mc_py_dict();
        for (int i = 0; i < n; i++) OK(mc_py_dict_set_int(d, i, mc_py_none()));
        OK(mc_py_list_append(lists, d));
    }
    mc_pyobj_t *deep = mc_py_int(0);
    for (int i = 0; i < 200; i++) {
        mc_pyobj_t *l = mc_py_list();
        OK(mc_py_list_append(l, deep));
        deep = l;
    }
    OK(mc_py_list_append(lists, deep));
    OK(mc_py_dict_set_str(root, "lists", lists));
    return root;
}

static void check_everything(const mc_pyobj_t *want, const mc_pyobj_t *got)
{
    assert_true(mc_py_equal(want, got));
    const mc_pyobj_t *sd = mc_py_dict_get_str(got, "model");
    const mc_pyobj_t *base = mc_py_dict_get_str(sd, "base");
    assert_ptr_equal(base, mc_py_dict_get_str(sd, "again"));
    assert_ptr_equal(base->tensor.storage, mc_py_dict_get_str(sd, "transposed")->tensor.storage);
    assert_ptr_equal(base->tensor.storage, mc_py_dict_get_str(sd, "tail")->tensor.storage);
    assert_true(mc_py_dict_get_str(sd, "param")->tensor.parameter);
}

static void test_roundtrip(void **state)
{
    (void)state;
    char err[512], path[] = "/tmp/mc_ckpt_XXXXXX";
    mc_pyobj_t *obj = everything(), *got;
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    OK(mc_torch_save(path, obj, err, sizeof err));
    int rc = mc_torch_load(path, 0, &got, err, sizeof err);
    if (rc) print_error("%s\n", err);
    assert_int_equal(rc, 0);
    check_everything(obj, got);
    /* tensors point into the 64-byte aligned records of the mapping */
    const mc_pyobj_t *t = mc_py_path(got, "model/layers.0.float32");
    assert_int_equal((uintptr_t)mc_py_tensor_data(t) % 64, 0);
    mc_py_decref(got);
    OK(mc_torch_load(path, MC_TORCH_LOAD_COPY, &got, err, sizeof err));
    unlink(path);
    check_everything(obj, got); /* the file is gone; the copies remain */
    mc_py_decref(got);

    for (int zip64 = 0; zip64 < 2; zip64++) {
        size_t len;
        uint8_t *buf = save_mem(obj, zip64, &len);
        OK(mc_torch_load_mem(buf, len, 0, &got, err, sizeof err));
        check_everything(obj, got);
        mc_py_decref(got);
        free(buf);
    }
    /* a loaded graph saves again */
    size_t len, len2;
    uint8_t *buf = save_mem(obj, false, &len);
    OK(mc_torch_load_mem(buf, len, MC_TORCH_LOAD_COPY, &got, err, sizeof err));
    uint8_t *buf2 = save_mem(got, false, &len2);
    expect_bytes(buf2, len2, buf, len);
    mc_py_decref(got);
    free(buf);
    free(buf2);
    mc_py_decref(obj);
}

/* The records torch writes, in its order, each record's data at a multiple of 64, the folder
 * named after the file; the zip64 variant still parses (its classic end record says 0xffff). */
static void test_zip_layout(void **state)
{
    (void)state;
    char err[512], dir[] = "/tmp/mc_ckpt_dir_XXXXXX", path[128];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/model_optim_rng.pt", dir);
    mc_pyobj_t *obj = py_small();
    int64_t s[] = {3};
    OK(mc_py_dict_set_str(obj, "w1", f32_tensor(1, s, 0)));
    OK(mc_py_dict_set_str(obj, "w2", f32_tensor(1, s, 0)));
    OK(mc_torch_save(path, obj, err, sizeof err));
    FILE *f = fopen(path, "rb");
    uint8_t buf[8192];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    unlink(path);
    rmdir(dir);
    mc_zipr_t z;
    OK(mc_zipr_open(&z, buf, n, err, sizeof err));
    assert_string_equal(z.prefix, "model_optim_rng");
    static const char *const NAMES[] = {"data.pkl", ".format_version", ".storage_alignment",
                                        "byteorder", "data/0", "data/1", "version",
                                        ".data/serialization_id"};
    assert_int_equal(z.n, 8);
    for (size_t i = 0; i < z.n; i++) {
        char want[64];
        snprintf(want, sizeof want, "model_optim_rng/%s", NAMES[i]);
        assert_string_equal(z.entries[i].name, want);
        assert_int_equal(z.entries[i].offset % 64, 0);
        OK(mc_zipr_check_crc(&z, &z.entries[i], err, sizeof err));
    }
    const mc_zipentry_t *v = mc_zipr_find(&z, "version");
    assert_memory_equal(buf + v->offset, "3\n", 2);
    assert_int_equal(buf[6], 0x08); /* general purpose flags 0x0808 */
    assert_int_equal(buf[7], 0x08);
    assert_int_equal(z.entries[0].offset, 64);
    mc_zipr_close(&z);

    size_t len;
    uint8_t *zb = save_mem(obj, true, &len);
    assert_int_equal(zb[len - 22 + 10], 0xff); /* classic count: see zip64 */
    OK(mc_zipr_open(&z, zb, len, err, sizeof err));
    assert_string_equal(z.prefix, "archive");
    for (size_t i = 0; i < z.n; i++) assert_int_equal(z.entries[i].offset % 64, 0);
    mc_zipr_close(&z);
    free(zb);
    mc_py_decref(obj);
}

/* ---- corrupt input --------------------------------------------------------------------------- */

static uint8_t *sample_file(size_t *len, bool zip64)
{
    mc_pyobj_t *obj = py_small();
    int64_t s[] = {4, 4};
    OK(mc_py_dict_set_str(obj, "w1", f32_tensor(2, s, 0)));
    OK(mc_py_dict_set_str(obj, "w2", f32_tensor(2, s, 100)));
    uint8_t *buf = save_mem(obj, zip64, len);
    mc_py_decref(obj);
    return buf;
}

static void test_crc_mismatch(void **state)
{
    (void)state;
    char err[512], path[] = "/tmp/mc_ckpt_XXXXXX";
    size_t len;
    uint8_t *buf = sample_file(&len, false);
    mc_zipr_t z;
    OK(mc_zipr_open(&z, buf, len, err, sizeof err));
    uint64_t w2 = mc_zipr_find(&z, "data/1")->offset, pkl = mc_zipr_find(&z, "data.pkl")->offset;
    mc_zipr_close(&z);
    mc_pyobj_t *got;

    buf[w2 + 5] ^= 0x40;
    assert_int_equal(mc_torch_load_mem(buf, len, 0, &got, err, sizeof err), -1);
    assert_null(got);
    assert_string_equal(err, "CRC mismatch in archive/data/1");
    OK(mc_torch_load_mem(buf, len, MC_TORCH_LOAD_NO_CRC, &got, err, sizeof err)); /* unchecked */
    mc_py_decref(got);
    /* from a file, the message names it */
    int fd = mkstemp(path);
    assert_true(write(fd, buf, len) == (ssize_t)len);
    close(fd);
    assert_int_equal(mc_torch_load(path, 0, &got, err, sizeof err), -1);
    char want[600];
    snprintf(want, sizeof want, "%s: CRC mismatch in archive/data/1", path);
    assert_string_equal(err, want);
    unlink(path);
    buf[w2 + 5] ^= 0x40;

    buf[pkl + 20] ^= 1;
    assert_int_equal(mc_torch_load_mem(buf, len, 0, &got, err, sizeof err), -1);
    assert_string_equal(err, "CRC mismatch in archive/data.pkl");
    buf[pkl + 20] ^= 1;
    OK(mc_torch_load_mem(buf, len, 0, &got, err, sizeof err));
    mc_py_decref(got);
    free(buf);
}

static void test_truncated(void **state)
{
    (void)state;
    char err[512], path[] = "/tmp/mc_ckpt_XXXXXX";
    size_t len;
    uint8_t *buf = sample_file(&len, false);
    mc_pyobj_t *got;
    for (size_t cut = 0; cut < len; cut += cut < 64 ? 1 : 61) {
        err[0] = '\0';
        assert_int_equal(mc_torch_load_mem(buf, cut, 0, &got, err, sizeof err), -1);
        assert_null(got);
        assert_true(err[0] != '\0');
    }
    assert_int_equal(mc_torch_load_mem(buf, len - 1, 0, &got, err, sizeof err), -1);
    assert_string_equal(err, "no end-of-central-directory record: not a zip archive, or truncated");
    int fd = mkstemp(path);
    assert_true(write(fd, buf, len / 2) == (ssize_t)(len / 2));
    close(fd);
    assert_int_equal(mc_torch_load(path, 0, &got, err, sizeof err), -1);
    assert_non_null(strstr(err, "truncated"));
    assert_int_equal(strncmp(err, path, strlen(path)), 0);
    fd = open(path, O_WRONLY | O_TRUNC);
    close(fd);
    assert_int_equal(mc_torch_load(path, 0, &got, err, sizeof err), -1);
    assert_non_null(strstr(err, "empty file"));
    unlink(path);
    assert_int_equal(mc_torch_load("/nonexistent/x.pt", 0, &got, err, sizeof err), -1);
    assert_string_equal(err, "/nonexistent/x.pt: cannot open: No such file or directory");
    free(buf);
}

/* Archives that are zips but not what torch.save writes. */
static void test_bad_archives(void **state)
{
    (void)state;
    char err[512];
    mc_pyobj_t *got;
    static const uint8_t legacy[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc};
    assert_int_equal(mc_torch_load_mem(legacy, sizeof legacy, 0, &got, err, sizeof err), -1);
    assert_non_null(strstr(err, "legacy format of torch < 1.6"));

    struct {
        const char *names[3];
        const char *pkl;
        size_t pkl_len;
        const char *data;
        size_t data_len;
        const char *want;
    } cases[] = {
        {{"version", NULL}, NULL, 0, NULL, 0, "no archive/data.pkl record: not a torch.save archive"},
        {{"data.pkl", NULL}, "N.", 2, NULL, 0, "no archive/version record: not a torch.save archive"},
        /* a storage of 6 floats whose record holds 20 bytes */
        {{"data.pkl", "version", "data/0"},
         LIT("\x80\x02(X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x01\x00\x00\x00" "0X\x03\x00\x00\x00" "cpuK\x06tQ."),
         LIT("01234567890123456789"),
         "archive/data.pkl: archive/data/0 holds 20 bytes but its storage is 6 x float32 (BINPERSID at byte 52)"},
        {{"data.pkl", "version", NULL},
         LIT("\x80\x02(X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x01\x00\x00\x00" "7X\x03\x00\x00\x00" "cpuK\x06tQ."),
         NULL, 0, "archive/data.pkl: storage '7' has no record archive/data/7 (BINPERSID at byte 52)"},
        /* one key, two storage types */
        {{"data.pkl", "version", "data/0"},
         LIT("\x80\x02(" PID("torch\nFloatStorage", "0", "\x03\x00\x00\x00" "cpu", "K\x01")
             PID("torch\nHalfStorage", "0", "\x03\x00\x00\x00" "cpu", "K\x02") "t."),
         LIT("0123"),
         "archive/data.pkl: storage '0' is used as two different types (BINPERSID at byte 103)"},
        {{"data.pkl", "version", NULL},
         LIT("\x80\x02(X\x07\x00\x00\x00storagectorch\nQuantumStorage\nX\x01\x00\x00\x00" "7X\x03\x00\x00\x00" "cpuK\x06tQ."),
         NULL, 0, "archive/data.pkl: unsupported storage type torch.QuantumStorage (BINPERSID at byte 54)"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        mc_zipw_t *z = mc_zipw_open(f, "archive", false);
        for (int i = 0; i < 3 && cases[c].names[i]; i++) {
            const char *nm = cases[c].names[i];
            const char *data = !strcmp(nm, "version") ? "3\n" : !strcmp(nm, "data.pkl") ? cases[c].pkl : cases[c].data;
            size_t n = !strcmp(nm, "version") ? 2 : !strcmp(nm, "data.pkl") ? cases[c].pkl_len : cases[c].data_len;
            OK(mc_zipw_add(z, nm, data, n, NULL, err, sizeof err));
        }
        OK(mc_zipw_finish(z, err, sizeof err));
        fclose(f);
        assert_int_equal(mc_torch_load_mem(buf, len, 0, &got, err, sizeof err), -1);
        if (strcmp(err, cases[c].want)) print_error("case %zu: %s\n", c, err);
        assert_string_equal(err, cases[c].want);
        free(buf);
    }
}

/* Pickles that must fail cleanly (or load, for harmless oddities), never crash. */
static void test_garbage_pickles(void **state)
{
    (void)state;
    static const struct {
        const char *p;
        size_t n;
        const char *want; /* error substring, or NULL: must load */
    } cases[] = {
        {LIT(""), "empty pickle"},
        {LIT("\x80\x02"), "no STOP"},
        {LIT("."), "stack underflow (STOP at byte 0)"},
        {LIT("\x80\x06N."), "unsupported pickle protocol 6"},
        {LIT("\x80\x02X\xff\xff\xff\x7f" "abc."), "truncated pickle: 2147483647 more bytes needed"},
        {LIT("h\x05."), "memo index 5 was never stored (BINGET at byte 0)"},
        {LIT("Na."), "stack underflow (APPEND at byte 1)"},
        {LIT("]q\x00h\x00" "a."), "a container that contains itself"},
        {LIT("}q\x00h\x00N" "s."), "a container that contains itself"},
        {LIT("]q\x00(h\x00" "e."), "a container that contains itself"},
        {LIT("I1\n."), "unsupported pickle opcode (INT at byte 0)"},
        {LIT("\xff."), "invalid pickle opcode (opcode 0xff at byte 0)"},
        {LIT("\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01."), "an int wider than 64 bits"},
        {LIT("\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x80\x00."), "an int wider than 64 bits"},
        {LIT("X\x02\x00\x00\x00\xc3\x28."), "not valid UTF-8"},
        {LIT("(((((N."), NULL}, /* unclosed marks are fine, as in CPython */
        {LIT("(N(N1."), NULL},
        {LIT("(t."), NULL},
        {LIT("N0."), "stack underflow (STOP at byte 2)"},
        {LIT("(\x85."), "stack underflow (TUPLE1 at byte 1)"},
        {LIT("cos\nsystem\nX\x02\x00\x00\x00ls\x85R."), NULL}, /* an opaque object, never a call */
        {LIT("cos\nsystem\nN\x85R."), NULL},
        {LIT("cfoo\nbar"), "GLOBAL line without its newline"},
        {LIT("c\n\n."), "an invalid global name"},
        {LIT("NN\x85R."), NULL},
        {LIT("}Nb."), "BUILD with a None on a plain dict"},
        {LIT("]Nb."), "BUILD with a None on a list"},
        {LIT("ctorch._utils\n_rebuild_tensor_v2\n(NK\x00))\x89}tR."), "a tensor rebuilt from malformed arguments"},
        {LIT("ctorch._utils\n_rebuild_tensor_v2\n)R."), "_rebuild_tensor_v2 with 0 arguments"},
        {LIT("(X\x07\x00\x00\x00storageNNNNtQ."), "a malformed storage persistent id"},
        {LIT("X\x01\x00\x00\x00xQ."), "a persistent id that is not a torch storage"},
        {LIT("\x94."), "stack underflow (MEMOIZE at byte 0)"},
        {LIT("Nr\xff\xff\xff\xff."), "memo index 4294967295 out of range"},
        {LIT("\x8b\xff\xff\xff\xff."), "negative LONG4 length"},
        {LIT("N(\x90."), "ADDITEMS without a set"},
        {LIT("\x8f(K\x01\x90."), NULL},
        {LIT("\x93."), "stack underflow"},
        {LIT("K\x01K\x02\x93."), "STACK_GLOBAL names that are not str"},
        {LIT("N)}\x92."), NULL},
        {LIT("N)}X\x01\x00\x00\x00kNs\x92."), "NEWOBJ_EX with keyword arguments"},
        {LIT("NN\x81."), "NEWOBJ arguments that are not a tuple"},
        {LIT("NNR."), "REDUCE arguments are a None, not a tuple"},
        {LIT("(NN(Nd."), "SETITEMS with an odd number of items"},
        {LIT("\x95\x01\x00\x00\x00\x00\x00\x00\x00N."), NULL},
        {LIT("P0\n."), "unsupported pickle opcode (PERSID at byte 0)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char err[512] = "";
        mc_pyobj_t *got = (mc_pyobj_t *)&err; /* must be reset */
        int rc = mc_unpickle(cases[i].p, cases[i].n, NULL, &got, err, sizeof err);
        if (cases[i].want ? rc != -1 || !strstr(err, cases[i].want) : rc != 0)
            print_error("case %zu: rc %d, err '%s', want '%s'\n", i, rc, err,
                        cases[i].want ? cases[i].want : "success");
        if (cases[i].want) {
            assert_int_equal(rc, -1);
            assert_null(got);
            assert_non_null(strstr(err, cases[i].want));
        } else {
            assert_int_equal(rc, 0);
            mc_py_decref(got);
        }
    }
}

/* A chain of 200000 nested lists, built through the memo with constant stack: loads, frees
 * without recursion, and the writer refuses it cleanly (deeper than Python would go). */
static void test_deep_chain(void **state)
{
    (void)state;
    enum { N = 200000 };
    uint8_t *p = malloc(16 * (size_t)N + 16), *q = p;
    *q++ = ']';
    *q++ = 'r';
    memset(q, 0, 4), q += 4;
    for (uint32_t i = 1; i < N; i++) {
        *q++ = ']';
        *q++ = 'j'; /* LONG_BINGET i-1 */
        q[0] = (uint8_t)(i - 1), q[1] = (uint8_t)((i - 1) >> 8), q[2] = (uint8_t)((i - 1) >> 16), q[3] = 0;
        q += 4;
        *q++ = 'a';
        *q++ = 'r';
        q[0] = (uint8_t)i, q[1] = (uint8_t)(i >> 8), q[2] = (uint8_t)(i >> 16), q[3] = 0;
        q += 4;
        *q++ = '0'; /* POP: only the memo keeps it */
    }
    *q++ = '0'; /* the first list; then the last, which holds all the others */
    *q++ = 'j';
    q[0] = (uint8_t)(N - 1), q[1] = (uint8_t)((N - 1) >> 8), q[2] = (uint8_t)((N - 1) >> 16), q[3] = 0;
    q += 4;
    *q++ = '.';
    char err[256];
    mc_pyobj_t *got;
    OK(mc_unpickle(p, (size_t)(q - p), NULL, &got, err, sizeof err));
    const mc_pyobj_t *o = got;
    int depth = 0;
    while (o->kind == MC_PY_LIST && mc_py_len(o)) o = mc_py_item(o, 0), depth++;
    assert_int_equal(depth, N - 1);
    uint8_t *out;
    size_t len;
    mc_pickle_storages_t st;
    assert_int_equal(mc_pickle_dump(got, &out, &len, &st, err, sizeof err), -1);
    assert_string_equal(err, "objects nested deeper than 1000 levels");
    mc_py_decref(got);
    free(p);
}

static void test_save_errors(void **state)
{
    (void)state;
    char err[512];
    int64_t s[] = {2};
    mc_pyobj_t *d = mc_py_dict();
    OK(mc_py_dict_set_str(d, "u16", mc_py_tensor_new(MC_TORCH_UINT16, 1, s)));
    assert_int_equal(mc_torch_save("/tmp/mc_ckpt_never.pt", d, err, sizeof err), -1);
    assert_non_null(strstr(err, "/tmp/mc_ckpt_never.pt: cannot save a uint16 tensor"));
    assert_int_equal(access("/tmp/mc_ckpt_never.pt", F_OK), -1); /* removed */
    mc_py_decref(d);
    d = mc_py_dict();
    assert_int_equal(mc_torch_save("/nonexistent/dir/x.pt", d, err, sizeof err), -1);
    assert_string_equal(err, "/nonexistent/dir/x.pt: cannot create: No such file or directory");
    mc_py_decref(d);
}

/* ---- fuzz ------------------------------------------------------------------------------------ */

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Random byte flips and cuts of a small checkpoint (plain and zip64), loaded with and without
 * the CRC check (the CRC catches most flips, so the unpickler and the zip parser are also fed
 * unchecked bytes); and flips of its data.pkl fed to the unpickler directly. Nothing may crash
 * or leak. MC_CKPT_FUZZ=<iterations>[,<seed>] runs a longer campaign. */
static void test_fuzz(void **state)
{
    (void)state;
    int iters = 8000;
    const char *env = getenv("MC_CKPT_FUZZ");
    if (env) {
        iters = atoi(env);
        const char *comma = strchr(env, ',');
        if (comma) rng_state = strtoull(comma + 1, NULL, 0) | 1;
    }
    size_t lens[2];
    uint8_t *origs[2] = {sample_file(&lens[0], false), sample_file(&lens[1], true)};
    uint8_t *buf = malloc(lens[1] > lens[0] ? lens[1] : lens[0]);
    char err[512];
    int loaded = 0, failed = 0;
    for (int it = 0; it < iters; it++) {
        size_t len = lens[it % 2];
        const uint8_t *orig = origs[it % 2];
        memcpy(buf, orig, len);
        size_t n = len;
        int flips = 1 + (int)(rnd() % 4);
        for (int k = 0; k < flips; k++) {
            size_t at = (size_t)(rnd() % len);
            buf[at] ^= (uint8_t)(1 + rnd() % 255);
        }
        if (rnd() % 8 == 0) n = (size_t)(rnd() % len);
        unsigned flags = it % 6 < 2 ? 0 : it % 6 < 4 ? MC_TORCH_LOAD_NO_CRC
                                                     : MC_TORCH_LOAD_NO_CRC | MC_TORCH_LOAD_COPY;
        mc_pyobj_t *got = NULL;
        err[0] = '\0';
        int rc = mc_torch_load_mem(buf, n, flags, &got, err, sizeof err);
        assert_true(rc == 0 || rc == -1);
        if (rc == 0) {
            loaded++;
            /* whatever loaded is a valid graph: it saves (or refuses) cleanly */
            uint8_t *out;
            size_t olen;
            mc_pickle_storages_t st;
            if (!mc_pickle_dump(got, &out, &olen, &st, err, sizeof err)) {
                free(out);
                mc_pickle_storages_free(&st);
            }
            mc_py_decref(got);
        } else {
            failed++;
            assert_true(err[0] != '\0');
            assert_null(got);
        }
    }
    /* the unpickler alone, on data.pkl with flips */
    const uint8_t *orig = origs[0];
    mc_zipr_t z;
    OK(mc_zipr_open(&z, orig, lens[0], err, sizeof err));
    const mc_zipentry_t *e = mc_zipr_find(&z, "data.pkl");
    int64_t s16 = 16;
    fake_storages_t fs = {{mc_py_storage_new(MC_TORCH_FLOAT32, s16), mc_py_storage_new(MC_TORCH_FLOAT32, s16)}, 2};
    mc_unpickle_storages_t us = {fake_storage, &fs};
    uint8_t *pkl = malloc(e->size);
    for (int it = 0; it < 2 * iters; it++) {
        memcpy(pkl, orig + e->offset, e->size);
        for (int k = 0; k < 1 + (int)(rnd() % 3); k++) pkl[rnd() % e->size] = (uint8_t)rnd();
        mc_pyobj_t *got = NULL;
        int rc = mc_unpickle(pkl, (size_t)(rnd() % 16 ? e->size : rnd() % e->size), &us, &got, err, sizeof err);
        assert_true(rc == 0 || rc == -1);
        mc_py_decref(got);
    }
    print_message("fuzz: %d loaded, %d rejected\n", loaded, failed);
    mc_py_decref(fs.s[0]);
    mc_py_decref(fs.s[1]);
    mc_zipr_close(&z);
    free(pkl);
    free(buf);
    free(origs[0]);
    free(origs[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dicts_and_lookups), cmocka_unit_test(test_tensors),
        cmocka_unit_test(test_python_bytes),      cmocka_unit_test(test_torch_bytes),
        cmocka_unit_test(test_protocols),         cmocka_unit_test(test_torch_variants),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_zip_layout),        cmocka_unit_test(test_crc_mismatch),
        cmocka_unit_test(test_truncated),         cmocka_unit_test(test_bad_archives),
        cmocka_unit_test(test_garbage_pickles),   cmocka_unit_test(test_deep_chain),
        cmocka_unit_test(test_save_errors),       cmocka_unit_test(test_fuzz),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
