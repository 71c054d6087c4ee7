#include "util/crc32c.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "util/rng.h"

namespace deltafin {
namespace {

// RFC 3720 (iSCSI) appendix B.4 check values.
TEST(Crc32c, KnownVectors) {
  const std::string digits = "123456789";
  EXPECT_EQ(crc32c(digits.data(), digits.size()), 0xE3069283u);
  EXPECT_EQ(crc32c_portable(digits.data(), digits.size()), 0xE3069283u);
  std::vector<uint8_t> zeros(32, 0x00), ones(32, 0xFF), inc(32), dec(32);
  for (int i = 0; i < 32; ++i) inc[i] = static_cast<uint8_t>(i), dec[i] = static_cast<uint8_t>(31 - i);
  EXPECT_EQ(crc32c(zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones.data(), 32), 0x62A8AB43u);
  EXPECT_EQ(crc32c(inc.data(), 32), 0x46DD794Eu);
  EXPECT_EQ(crc32c(dec.data(), 32), 0x113FDB5Cu);
  EXPECT_EQ(crc32c(nullptr, 0), 0u);
}

TEST(Crc32c, HardwareMatchesPortableAndChains) {
  Rng rng(7);
  std::vector<uint8_t> buf(100003);
  for (auto& b : buf) b = static_cast<uint8_t>(rng.next());
  // 12288 = one block of the three interleaved 4 KiB stretches; sizes around
  // it and several blocks plus a tail cover the join and the remainder.
  for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{4096}, size_t{12287}, size_t{12288},
                   size_t{12289}, size_t{24576 + 4100}, size_t{3 * 12288 + 7}, buf.size()}) {
    EXPECT_EQ(crc32c(buf.data(), n), crc32c_portable(buf.data(), n)) << n;
    const size_t half = n / 3;
    EXPECT_EQ(crc32c(buf.data() + half, n - half, crc32c(buf.data(), half)), crc32c(buf.data(), n)) << n;
  }
  const uint32_t before = crc32c(buf.data(), buf.size());
  buf[5000] ^= 0x10;
  EXPECT_NE(crc32c(buf.data(), buf.size()), before);
}

}  // namespace
}  // namespace deltafin
