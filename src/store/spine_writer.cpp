#include "store/spine_writer.h"

#include <algorithm>
#include <cstdio>

#include "store/spine_file.h"
#include "util/error.h"

namespace deltafin {

namespace {

std::string layer_file(int64_t layer) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "spine/L%03lld.bin", static_cast<long long>(layer));
  return buf;
}

void write_zeros(const std::function<void(const uint8_t*, size_t)>& out, uint64_t n) {
  static const std::vector<uint8_t> zeros(kSpineAlign, 0);  // padding is at most one page
  while (n > 0) {
    const uint64_t k = std::min<uint64_t>(n, zeros.size());
    out(zeros.data(), k);
    n -= k;
  }
}

}  // namespace

SpinePlan plan_spine(const FamilyCheckpoint& k, SpineFormat format) {
  if (format == SpineFormat::Int8Row && !k.int8_row_spine())
    fail(k.tensors().dir(), ": an int8-row spine is not available for ", k.family(), " models (use --spine bf16)");
  SpinePlan plan;
  plan.format = format;
  const int64_t L = k.layers();
  std::vector<SpineFilePlan> files(static_cast<size_t>(L + 1));  // [0] globals, [1 + l] layer l
  files[0].path = "spine/globals.bin";
  for (int64_t l = 0; l < L; ++l) files[static_cast<size_t>(l + 1)].path = layer_file(l);

  for (const SpineTensorSpec& spec : k.spine_tensors()) {
    const TensorSpec& s = spec.tensor;
    if (spec.layer < -1 || spec.layer >= L) fail(s.name, ": layer ", spec.layer, " is outside the model's ", L, " layers");
    SpineFilePlan& f = files[static_cast<size_t>(spec.layer + 1)];
    const bool quantize = format == SpineFormat::Int8Row && spec.int8_row;
    f.sources.push_back({s.name, quantize});
    if (quantize) {
      const uint64_t rows = s.shape[0], cols = s.shape[1];
      f.tensors.push_back({s.name, DType::I8, {rows, cols}, 0, rows * cols});
      f.tensors.push_back({spine_scale_name(s.name), DType::F16, {rows}, 0, rows * 2});
      plan.resident_bytes += rows * cols + rows * 2;
    } else {
      f.tensors.push_back({s.name, s.dtype, s.shape, 0, s.bytes()});
      uint64_t elements = 1;
      for (uint64_t d : s.shape) elements *= d;
      plan.resident_bytes += spec.matrix ? s.bytes() : elements * sizeof(float);
    }
  }
  for (SpineFilePlan& f : files) {
    f.head = layout_spine_file(format, f.tensors, &f.bytes);
    plan.file_bytes += f.bytes;
  }
  plan.files = std::move(files);
  return plan;
}

void generate_spine_file(const FamilyCheckpoint& k, const SpineFilePlan& plan,
                         const std::function<void(const uint8_t*, size_t)>& out, uint64_t chunk_bytes) {
  const uint64_t chunk = std::max<uint64_t>(1, chunk_bytes);
  out(reinterpret_cast<const uint8_t*>(plan.head.data()), plan.head.size());
  uint64_t pos = plan.head.size();
  auto pad_to = [&](uint64_t offset) {
    write_zeros(out, offset - pos);
    pos = offset;
  };
  std::vector<uint8_t> buf;
  size_t ti = 0;  // index into plan.tensors
  for (const SpineSourceTensor& src : plan.sources) {
    TensorRef ref = k.tensors().find(src.name);
    if (!ref) fail(k.tensors().dir(), ": tensor '", src.name, "' not found");
    const TensorInfo& info = *ref.info;
    const SpineTensor& dst = plan.tensors[ti++];
    pad_to(dst.offset);
    if (!src.quantize) {
      // Stored exactly as released.
      for (uint64_t off = 0; off < info.bytes(); off += chunk) {
        const uint64_t n = std::min(chunk, info.bytes() - off);
        buf.resize(n);
        ref.shard->read_range(info, off, n, buf.data());
        out(buf.data(), n);
      }
      pos += info.bytes();
      continue;
    }
    const size_t rows = info.shape[0], cols = info.shape[1];
    const size_t block = std::max<size_t>(1, chunk / (cols * 2));
    std::vector<uint16_t> scales(rows);
    std::vector<int8_t> q;
    for (size_t r = 0; r < rows; r += block) {
      const size_t n = std::min(block, rows - r);
      buf.resize(n * cols * 2);
      ref.shard->read_range(info, r * cols * 2, buf.size(), buf.data());
      q.resize(n * cols);
      quantize_int8_rows(src.name, r, n, cols, buf.data(), q.data(), scales.data() + r);
      out(reinterpret_cast<const uint8_t*>(q.data()), q.size());
    }
    pos += rows * cols;
    const SpineTensor& s = plan.tensors[ti++];
    pad_to(s.offset);
    std::vector<uint8_t> le(rows * 2);
    for (size_t r = 0; r < rows; ++r) {
      le[2 * r] = static_cast<uint8_t>(scales[r] & 0xff);
      le[2 * r + 1] = static_cast<uint8_t>(scales[r] >> 8);
    }
    out(le.data(), le.size());
    pos += le.size();
  }
  pad_to(plan.bytes);
}

}  // namespace deltafin
