#include "store/spine_file.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <unordered_map>

#include "store/spine_layout.h"
#include "util/error.h"
#include "util/file.h"
#include "util/numeric.h"

namespace deltafin {

namespace {

// Round half to even written out, so the result does not depend on the
// floating-point rounding mode in force.
float round_half_even(float v) {
  const float f = std::floor(v);
  const float diff = v - f;  // exact: v and f are within 1 of each other
  if (diff > 0.5f) return f + 1.0f;
  if (diff < 0.5f) return f;
  return std::fmod(f, 2.0f) == 0.0f ? f : f + 1.0f;
}

}  // namespace

void quantize_int8_rows(const std::string& name, size_t row0, size_t rows, size_t cols, const uint8_t* bf16,
                        int8_t* q, uint16_t* scales) {
  std::vector<float> x(cols);
  for (size_t r = 0; r < rows; ++r) {
    float amax = 0.0f;
    for (size_t c = 0; c < cols; ++c) {
      x[c] = bf16_to_f32(load_u16le(bf16 + 2 * (r * cols + c)));
      if (!std::isfinite(x[c]))
        fail(name, ": row ", row0 + r, ", column ", c, " is ", x[c], "; the int8-row spine needs finite weights");
      amax = std::fmax(amax, std::fabs(x[c]));
    }
    const float scale = amax == 0.0f ? 1.0f : amax / 127.0f;
    const uint16_t h = f32_to_f16(scale);
    if (!std::isfinite(f16_to_f32(h)))
      fail(name, ": row ", row0 + r, ": scale ", scale, " (max |x| = ", amax, ") exceeds the f16 range of the int8-row spine");
    scales[r] = h;
    // q uses the unrounded fp32 scale (k3-model.md §5.2); only storage rounds it.
    for (size_t c = 0; c < cols; ++c) {
      float v = round_half_even(x[c] / scale);
      v = std::fmin(127.0f, std::fmax(-127.0f, v));
      q[r * cols + c] = static_cast<int8_t>(v);
    }
  }
}

Matrix quantize_int8_row(const std::string& name, const Matrix& bf16) {
  if (bf16.type != WeightType::BF16 || bf16.storage.size() != bf16.rows * bf16.cols * 2)
    fail(name, ": int8-row quantisation needs a BF16 matrix");
  Matrix m;
  m.type = WeightType::Int8Row;
  m.rows = bf16.rows;
  m.cols = bf16.cols;
  m.storage.resize(m.rows * m.cols);
  std::vector<uint16_t> scales(m.rows);
  quantize_int8_rows(name, 0, m.rows, m.cols, bf16.storage.data(), reinterpret_cast<int8_t*>(m.storage.data()),
                     scales.data());
  m.scales.resize(m.rows * 2);
  for (size_t r = 0; r < m.rows; ++r) {  // little-endian f16, as on disk
    m.scales[2 * r] = static_cast<uint8_t>(scales[r] & 0xff);
    m.scales[2 * r + 1] = static_cast<uint8_t>(scales[r] >> 8);
  }
  return m;
}

namespace {

// The store's spine files, opened once; tensors read on request with pread.
class StoreSpineSource : public SpineTensorSource {
public:
  StoreSpineSource(const std::string& store_dir, const StoreManifest& m) {
    for (const SpineFileEntry& e : m.spine_files) {
      const std::string path = (std::filesystem::path(store_dir) / e.path).string();
      File f = File::open_read(path);
      // Size only: hashing the whole spine on every start would cost as much as
      // reading it twice; `deltafin doctor --full` checks the hashes.
      if (f.size() != e.bytes)
        fail(path, ": ", f.size(), " bytes, but store.json records ", e.bytes,
             " (an interrupted or damaged store: run deltafin doctor, then rerun setup)");
      SpineHeader h = read_spine_header(f);
      if (h.format != m.spine_format)
        fail(path, ": a ", spine_format_name(h.format), " spine file, but store.json says the spine is ",
             spine_format_name(m.spine_format));
      const size_t index = files_.size();
      for (SpineTensor& t : h.tensors) {
        std::string name = t.name;
        if (!tensors_.emplace(name, Located{index, std::move(t)}).second)
          fail(path, ": tensor '", name, "' is also in another spine file");
      }
      files_.push_back(std::move(f));
    }
  }

  Matrix matrix(const std::string& name) override {
    const Located& t = find(name);
    Matrix m;
    if (t.tensor.shape.size() != 2 ||
        (t.tensor.dtype != DType::BF16 && t.tensor.dtype != DType::I8 && t.tensor.dtype != DType::F8_E4M3))
      fail(where(t), ": tensor '", name, "' is ", dtype_name(t.tensor.dtype), " of rank ", t.tensor.shape.size(),
           ", not a BF16, I8 or F8_E4M3 matrix");
    m.rows = t.tensor.shape[0];
    m.cols = t.tensor.shape[1];
    m.storage = read<WeightBytes>(t);
    if (t.tensor.dtype == DType::BF16) {
      m.type = WeightType::BF16;
      return m;
    }
    if (t.tensor.dtype == DType::F8_E4M3) {
      m.type = WeightType::FP8Block;
      const Located& s = find(fp8_scale_name(name));
      attach_fp8_scales(m, name, where(s), s.tensor.dtype, s.tensor.shape, read(s));
      return m;
    }
    m.type = WeightType::Int8Row;
    const Located& s = find(spine_scale_name(name));
    if (s.tensor.dtype != DType::F16 || s.tensor.shape != std::vector<uint64_t>{m.rows})
      fail(where(s), ": tensor '", s.tensor.name, "' must be F16 [", m.rows, "] (the row scales of '", name, "')");
    m.scales = read(s);
    return m;
  }

  std::vector<float> vec(const std::string& name) override {
    const Located& t = find(name);
    std::vector<uint8_t> raw = read(t);
    std::vector<float> out(raw.size() / dtype_size(t.tensor.dtype));
    if (t.tensor.dtype == DType::F32) {
      for (size_t i = 0; i < out.size(); ++i)
        out[i] = f32_from_bits(static_cast<uint32_t>(raw[4 * i]) | static_cast<uint32_t>(raw[4 * i + 1]) << 8 |
                               static_cast<uint32_t>(raw[4 * i + 2]) << 16 | static_cast<uint32_t>(raw[4 * i + 3]) << 24);
    } else if (t.tensor.dtype == DType::BF16) {
      for (size_t i = 0; i < out.size(); ++i) out[i] = bf16_to_f32(load_u16le(&raw[2 * i]));
    } else {
      fail(where(t), ": tensor '", name, "' is ", dtype_name(t.tensor.dtype), ", expected BF16 or F32");
    }
    return out;
  }

private:
  struct Located {
    size_t file = 0;
    SpineTensor tensor;
  };

  const Located& find(const std::string& name) const {
    auto it = tensors_.find(name);
    if (it == tensors_.end()) fail("store spine: tensor '", name, "' is in none of the spine files");
    return it->second;
  }

  const std::string& where(const Located& t) const { return files_[t.file].path(); }

  template <typename Bytes = std::vector<uint8_t>>
  Bytes read(const Located& t) const {
    Bytes out(t.tensor.bytes);
    files_[t.file].pread_exact(out.data(), out.size(), t.tensor.offset);
    return out;
  }

  std::vector<File> files_;
  std::unordered_map<std::string, Located> tensors_;
};

}  // namespace

std::unique_ptr<SpineTensorSource> open_store_spine(const std::string& store_dir, const StoreManifest& m) {
  return std::make_unique<StoreSpineSource>(store_dir, m);
}

}  // namespace deltafin
