// cub::DeviceRadixSort::SortPairs on the emulated device (test/emu), with CUB's documented
// contract: the first call, with d_temp_storage NULL, only sets temp_storage_bytes; the second
// sorts num_items (key, value) pairs stably by the key bits [begin_bit, end_bit) (bits outside
// the range do not order, so a range too narrow mis-sorts as on a GPU), writing keys_out and
// values_out and leaving the inputs. Every buffer must be device memory of the size the call
// implies, and the temporary storage at least what the first call asked for: the sort uses it
// (a temporary storage that overlaps another buffer corrupts it here too).
#ifndef MC_TEST_EMU_CUB_DEVICE_RADIX_SORT_CUH
#define MC_TEST_EMU_CUB_DEVICE_RADIX_SORT_CUH

#include <cuda_runtime.h>
#include <stddef.h>
#include <string.h>

#include <type_traits>

#include "test/emu/emu.h"

namespace cub {

struct DeviceRadixSort {
    template <typename K, typename V>
    static cudaError_t SortPairs(void *d_temp_storage, size_t &temp_storage_bytes, const K *d_keys_in, K *d_keys_out,
                                 const V *d_values_in, V *d_values_out, int num_items, int begin_bit = 0,
                                 int end_bit = (int)sizeof(K) * 8, cudaStream_t stream = 0)
    {
        static_assert(std::is_unsigned<K>::value, "the emulation sorts unsigned keys (all the backend uses)");
        (void)stream;
        const size_t n = num_items > 0 ? (size_t)num_items : 0;
        // storage for one pass of (key, value) ping-pong buffers, plus CUB-like slack
        const size_t need = n * (sizeof(K) + sizeof(V)) + 1024;
        if (!d_temp_storage) {
            temp_storage_bytes = need;
            return cudaSuccess;
        }
        if (num_items < 0 || begin_bit < 0 || end_bit > (int)sizeof(K) * 8 || begin_bit > end_bit) {
            mc_emu::note("cub::DeviceRadixSort::SortPairs: %d items, bits [%d, %d)", num_items, begin_bit, end_bit);
            return cudaErrorInvalidValue;
        }
        if (temp_storage_bytes < need)
            mc_emu::fail("cub::DeviceRadixSort::SortPairs: %zu bytes of temporary storage for %zu items, %zu needed",
                         temp_storage_bytes, n, need);
        mc_emu::require_device(d_temp_storage, temp_storage_bytes, "cub::DeviceRadixSort::SortPairs: temporary storage");
        if (n) {
            mc_emu::require_device(d_keys_in, n * sizeof(K), "cub::DeviceRadixSort::SortPairs: keys in");
            mc_emu::require_device(d_keys_out, n * sizeof(K), "cub::DeviceRadixSort::SortPairs: keys out");
            mc_emu::require_device(d_values_in, n * sizeof(V), "cub::DeviceRadixSort::SortPairs: values in");
            mc_emu::require_device(d_values_out, n * sizeof(V), "cub::DeviceRadixSort::SortPairs: values out");
        }
        // least significant digit first, one bit per pass, through the temporary storage
        K *tk = (K *)d_temp_storage;
        V *tv = (V *)((char *)d_temp_storage + n * sizeof(K));
        memcpy(d_keys_out, d_keys_in, n * sizeof(K));
        memcpy(d_values_out, d_values_in, n * sizeof(V));
        for (int bit = begin_bit; bit < end_bit; bit++) {
            size_t z = 0;
            for (size_t i = 0; i < n; i++) z += !((d_keys_out[i] >> bit) & 1u);
            size_t lo = 0, hi = z;
            for (size_t i = 0; i < n; i++) {
                const size_t j = ((d_keys_out[i] >> bit) & 1u) ? hi++ : lo++;
                tk[j] = d_keys_out[i];
                tv[j] = d_values_out[i];
            }
            memcpy(d_keys_out, tk, n * sizeof(K));
            memcpy(d_values_out, tv, n * sizeof(V));
        }
        mc_emu::after_launch("cub::DeviceRadixSort::SortPairs");
        return cudaSuccess;
    }
};

} // namespace cub

#endif
