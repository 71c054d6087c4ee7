#include "format/npy.h"

#include "util/error.h"
#include "util/file.h"

namespace deltafin {

std::string npy_header_f32(const std::vector<uint64_t>& shape) {
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i) dict += cat(i ? ", " : "", shape[i]);
  if (shape.size() == 1) dict += ",";
  dict += "), }";
  // magic (6) + version (2) + header length (2) + dict, padded with spaces and
  // ended by '\n' so the data starts 64-byte aligned (what numpy writes).
  size_t total = 10 + dict.size() + 1;
  size_t padded = (total + 63) / 64 * 64;
  dict.append(padded - total, ' ');
  dict.push_back('\n');
  if (dict.size() > 65535) fail("npy: header too long for format version 1.0");
  std::string h = "\x93NUMPY";
  h.push_back('\x01');
  h.push_back('\x00');
  h.push_back(static_cast<char>(dict.size() & 0xff));
  h.push_back(static_cast<char>(dict.size() >> 8));
  return h + dict;
}

void write_npy_f32(const std::string& path, const std::vector<uint64_t>& shape, const float* data) {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  AtomicFile f(path);
  std::string header = npy_header_f32(shape);
  f.write(header.data(), header.size());
  f.write(data, n * sizeof(float));  // x86-64 and arm64 are little-endian, as '<f4' says
  f.commit();
}

}  // namespace deltafin
