#include "format/npy.h"

#include <gtest/gtest.h>

#include <cstring>

#include "support/test_support.h"
#include "util/file.h"

using namespace deltafin;

TEST(Npy, HeaderIsVersionOneAndAligned) {
  std::string h = npy_header_f32({2, 3});
  ASSERT_GE(h.size(), 10u);
  EXPECT_EQ(h.substr(0, 6), "\x93NUMPY");
  EXPECT_EQ(h[6], 1);
  EXPECT_EQ(h[7], 0);
  const size_t dict_len = static_cast<uint8_t>(h[8]) | (static_cast<uint8_t>(h[9]) << 8);
  EXPECT_EQ(h.size(), 10 + dict_len);
  EXPECT_EQ(h.size() % 64, 0u);
  EXPECT_EQ(h.back(), '\n');
  EXPECT_EQ(h.substr(10, 60).rfind("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 0), 0u);
  EXPECT_NE(npy_header_f32({5}).find("'shape': (5,)"), std::string::npos);  // one-element tuple
}

TEST(Npy, WritesDataAfterHeader) {
  test::TempDir tmp;
  const float data[6] = {1.0f, -2.5f, 3.25f, 0.0f, 1e-30f, 7.0f};
  write_npy_f32(tmp.file("a.npy"), {2, 3}, data);
  std::string bytes = read_text_file(tmp.file("a.npy"));
  std::string header = npy_header_f32({2, 3});
  ASSERT_EQ(bytes.size(), header.size() + sizeof data);
  EXPECT_EQ(bytes.substr(0, header.size()), header);
  EXPECT_EQ(std::memcmp(bytes.data() + header.size(), data, sizeof data), 0);
}
