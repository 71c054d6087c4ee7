#include "util/crc32c.h"

#include <array>
#include <cstring>

#if defined(__aarch64__) && defined(__linux__)
#include <arm_acle.h>
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

namespace deltafin {

namespace {

constexpr uint32_t kPoly = 0x82F63B78u;  // reflected Castagnoli polynomial

constexpr std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
    t[i] = c;
  }
  return t;
}

constexpr std::array<uint32_t, 256> kTable = make_table();

#if defined(__x86_64__)
// SSE4.2's crc32 instruction computes exactly this polynomial, 8 bytes a step.
__attribute__((target("sse4.2"))) uint32_t crc32c_sse42(const uint8_t* p, size_t n, uint32_t crc) {
  uint64_t c = crc;
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = __builtin_ia32_crc32di(c, v);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  while (n--) c32 = __builtin_ia32_crc32qi(c32, *p++);
  return c32;
}

// One crc32 instruction takes 3 cycles but a new one can start every cycle,
// so a single chain runs at a third of the unit's speed. Three chains over
// three consecutive stretches of kStretch bytes run side by side, and are
// joined by linearity: the register after A||B is shift(reg_A, |B|) ^ reg_B,
// where reg_B starts from 0 and shift(r, n) runs r through n zero bytes.
// shift by kStretch is linear in r, so it is four 256-entry tables built once.
constexpr size_t kStretch = 4096;

struct ShiftTables {
  uint32_t t[4][256];
};

__attribute__((target("sse4.2"))) uint32_t shift_by_zeros(uint32_t r, size_t n) {
  uint64_t c = r;
  for (size_t i = 0; i < n / 8; ++i) c = __builtin_ia32_crc32di(c, 0);
  return static_cast<uint32_t>(c);
}

const ShiftTables& shift_tables() {
  static const ShiftTables tables = [] {
    ShiftTables s{};
    for (int k = 0; k < 4; ++k)
      for (uint32_t v = 0; v < 256; ++v) s.t[k][v] = shift_by_zeros(v << (8 * k), kStretch);
    return s;
  }();
  return tables;
}

uint32_t shift_stretch(const ShiftTables& s, uint32_t r) {
  return s.t[0][r & 0xFF] ^ s.t[1][(r >> 8) & 0xFF] ^ s.t[2][(r >> 16) & 0xFF] ^ s.t[3][r >> 24];
}

__attribute__((target("sse4.2"))) uint32_t crc32c_sse42_3way(const uint8_t* p, size_t n, uint32_t crc) {
  const ShiftTables& s = shift_tables();
  while (n >= 3 * kStretch) {
    uint64_t a = crc, b = 0, c = 0;
    const uint8_t* pa = p;
    const uint8_t* pb = p + kStretch;
    const uint8_t* pc = p + 2 * kStretch;
    for (size_t i = 0; i < kStretch; i += 8) {
      uint64_t va, vb, vc;
      std::memcpy(&va, pa + i, 8);
      std::memcpy(&vb, pb + i, 8);
      std::memcpy(&vc, pc + i, 8);
      a = __builtin_ia32_crc32di(a, va);
      b = __builtin_ia32_crc32di(b, vb);
      c = __builtin_ia32_crc32di(c, vc);
    }
    crc = shift_stretch(s, shift_stretch(s, static_cast<uint32_t>(a)) ^ static_cast<uint32_t>(b)) ^ static_cast<uint32_t>(c);
    p += 3 * kStretch;
    n -= 3 * kStretch;
  }
  return crc32c_sse42(p, n, crc);
}

bool have_sse42() {
  static const bool yes = __builtin_cpu_supports("sse4.2");
  return yes;
}
#endif

#if defined(__aarch64__) && defined(__linux__)
// ARMv8's CRC32C instructions compute the same polynomial, 8 bytes a step.
// They are optional in ARMv8.0 (mandatory from 8.1), so the file is built for
// baseline AArch64 and only this function is compiled with +crc; it runs
// after the kernel's HWCAP_CRC32 says the CPU has them. One chain only: the
// x86 three-way split above was tuned on x86 and is not needed for the check
// to be right.
__attribute__((target("+crc"))) uint32_t crc32c_armv8(const uint8_t* p, size_t n, uint32_t crc) {
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    crc = __crc32cd(crc, v);
    p += 8;
    n -= 8;
  }
  while (n--) crc = __crc32cb(crc, *p++);
  return crc;
}

bool have_armv8_crc() {
  static const bool yes = (getauxval(AT_HWCAP) & HWCAP_CRC32) != 0;
  return yes;
}
#endif

}  // namespace

uint32_t crc32c_portable(const void* data, size_t size, uint32_t crc) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  for (size_t i = 0; i < size; ++i) c = kTable[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return ~c;
}

uint32_t crc32c(const void* data, size_t size, uint32_t crc) {
#if defined(__x86_64__)
  if (have_sse42()) return ~crc32c_sse42_3way(static_cast<const uint8_t*>(data), size, ~crc);
#elif defined(__aarch64__) && defined(__linux__)
  if (have_armv8_crc()) return ~crc32c_armv8(static_cast<const uint8_t*>(data), size, ~crc);
#endif
  return crc32c_portable(data, size, crc);
}

}  // namespace deltafin
