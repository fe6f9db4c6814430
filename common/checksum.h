#pragma once
// XXH64 (Yann Collet's xxHash, 64-bit variant), written from its specification: a fast, well-tested
// non-cryptographic hash. Checkpoints store it for every tensor and for their metadata, so damage on
// disk or in transit is caught when a checkpoint is loaded instead of training on corrupt weights.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace mygpt {

uint64_t xxh64(const void* data, std::size_t size, uint64_t seed = 0);
inline uint64_t xxh64(std::string_view bytes, uint64_t seed = 0) { return xxh64(bytes.data(), bytes.size(), seed); }

// 16 lower-case hex digits.
std::string hex64(uint64_t value);

}  // namespace mygpt
