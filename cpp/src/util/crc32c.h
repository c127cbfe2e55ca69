// CRC-32C (Castagnoli) of a byte range, hardware-accelerated where the CPU allows.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lsio {

/// CRC-32C of data, as the Zarr crc32c codec and shard indexes define it.
uint32_t Crc32c(const uint8_t* data, size_t n);

}  // namespace lsio
