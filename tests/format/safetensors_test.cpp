// safetensors reading and writing (k3-model.md §3.1): a round trip through the
// streaming writer, and hand-built raw files for every way a header can be
// malformed, each refused with an error naming the file, the tensor and the
// problem.
#include "format/safetensors.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>

#include "format/dtype.h"
#include "support/k3_fixture.h"
#include "format/safetensors_writer.h"
#include "support/test_support.h"
#include "util/error.h"

using namespace deltafin;
using namespace deltafin::test;

namespace {

// Writes a raw file (8-byte length + header text + payload) and opens it.
struct RawFile {
  TempDir dir;
  std::string path = dir.file("raw.safetensors");
  SafetensorsFile open(const std::string& header, const std::string& payload) {
    write_bytes(path, raw_safetensors(header, payload));
    return SafetensorsFile::open(path);
  }
};

}  // namespace

TEST(Safetensors, WriterRoundTrip) {
  TempDir dir;
  const std::string path = dir.file("rt.safetensors");
  std::vector<TensorSpec> specs = {
      {"alpha", DType::F32, {2, 3}},      // 24 bytes at [0, 24)
      {"beta", DType::BF16, {4}},         // 8 bytes at [24, 32)
      {"empty", DType::U8, {0, 5}},       // 0 bytes at [32, 32)
      {"gamma", DType::I64, {1, 1, 1}},   // 8 bytes at [32, 40)
      {"delta", DType::U8, {3}},          // 3 bytes at [40, 43)
  };
  std::string payload;
  for (int i = 0; i < 43; ++i) payload.push_back(static_cast<char>(i * 5 + 1));
  {
    SafetensorsWriter w(path, specs, {{"format", "pt"}, {"note", "round trip"}});
    EXPECT_EQ(w.payload_bytes(), 43u);
    // Pieces that straddle tensor boundaries are fine.
    w.append(payload.data(), 10);
    w.append(payload.data() + 10, 30);
    w.append(payload.data() + 40, 3);
    w.commit();
  }
  SafetensorsFile f = SafetensorsFile::open(path);
  EXPECT_EQ(f.path(), path);
  EXPECT_EQ((8 + f.header_length()) % 8, 0u) << "payload must start 8-byte aligned";
  EXPECT_EQ(f.file_size(), 8 + f.header_length() + 43);
  EXPECT_EQ(f.header_length(), safetensors_header_json(specs, {{"format", "pt"}, {"note", "round trip"}}).size());

  ASSERT_EQ(f.tensors().size(), 5u);
  struct Want {
    const char* name;
    DType dtype;
    std::vector<uint64_t> shape;
    uint64_t begin, end, elements;
  };
  const Want want[] = {{"alpha", DType::F32, {2, 3}, 0, 24, 6},   {"beta", DType::BF16, {4}, 24, 32, 4},
                       {"empty", DType::U8, {0, 5}, 32, 32, 0},   {"gamma", DType::I64, {1, 1, 1}, 32, 40, 1},
                       {"delta", DType::U8, {3}, 40, 43, 3}};
  for (size_t i = 0; i < 5; ++i) {
    const TensorInfo& t = f.tensors()[i];
    SCOPED_TRACE(want[i].name);
    EXPECT_EQ(t.name, want[i].name);
    EXPECT_EQ(t.dtype, want[i].dtype);
    EXPECT_EQ(t.shape, want[i].shape);
    EXPECT_EQ(t.begin, want[i].begin);
    EXPECT_EQ(t.end, want[i].end);
    EXPECT_EQ(t.bytes(), want[i].end - want[i].begin);
    EXPECT_EQ(t.elements(), want[i].elements);
    EXPECT_EQ(t.file_offset, 8 + f.header_length() + want[i].begin);
    const TensorInfo* found = f.find(want[i].name);
    ASSERT_NE(found, nullptr);
    EXPECT_EQ(found->begin, want[i].begin);
    std::string got(t.bytes(), '\0');
    f.read(t, got.data());
    EXPECT_EQ(got, payload.substr(want[i].begin, want[i].end - want[i].begin));
  }
  EXPECT_EQ(f.find("missing"), nullptr);
  ASSERT_EQ(f.metadata().size(), 2u);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  EXPECT_EQ(f.metadata().at("note"), "round trip");

  // read_range inside the tensor.
  const TensorInfo& alpha = *f.find("alpha");
  char buf[24];
  f.read_range(alpha, 4, 8, buf);
  EXPECT_EQ(std::string(buf, 8), payload.substr(4, 8));
  f.read_range(alpha, 24, 0, buf);  // empty range at the very end is allowed
  f.read_range(alpha, 0, 24, buf);
  EXPECT_EQ(std::string(buf, 24), payload.substr(0, 24));
  // ... and outside it: refused, naming the file and tensor.
  EXPECT_FAILS_WITH(f.read_range(alpha, 20, 8, buf), path, "'alpha'", "outside its 24 bytes");
  EXPECT_FAILS_WITH(f.read_range(alpha, 25, 0, buf), path, "'alpha'", "outside");
  EXPECT_FAILS_WITH(f.read_range(alpha, 8, UINT64_MAX, buf), path, "'alpha'", "outside");
}

TEST(Safetensors, HeaderJsonLayout) {
  // The exact header text for a hand-computed case: ordered keys, offsets, space padding.
  std::string h = safetensors_header_json({{"w", DType::F16, {2, 2}}}, {});
  const std::string body = R"({"w":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]}})";
  ASSERT_GE(h.size(), body.size());
  EXPECT_EQ(h.substr(0, body.size()), body);
  EXPECT_EQ(h.find_first_not_of(' ', body.size()), std::string::npos);
  EXPECT_EQ((8 + h.size()) % 8, 0u);
  EXPECT_LT(h.size() - body.size(), 8u);
}

TEST(Safetensors, WriterRefusesWrongPayloadAmounts) {
  TempDir dir;
  const std::string path = dir.file("w.safetensors");
  {
    SafetensorsWriter w(path, {{"t", DType::F32, {2}}});
    char bytes[9] = {};
    EXPECT_FAILS_WITH(w.append(bytes, 9), path, "more payload bytes", "(8)");
    w.append(bytes, 4);
    EXPECT_FAILS_WITH(w.commit(), path, "got 4 payload bytes", "need 8");
  }
  EXPECT_FALSE(file_exists(path)) << "an uncommitted writer must leave nothing under the final name";
}

TEST(Safetensors, WriterRefusesDuplicateNames) {
  TempDir dir;
  const std::string path = dir.file("dup.safetensors");
  std::vector<TensorSpec> specs = {{"x", DType::U8, {2}}, {"y", DType::U8, {2}}, {"x", DType::U8, {4}}};
  EXPECT_FAILS_WITH(SafetensorsWriter(path, specs), path, "'x'", "twice");
  EXPECT_FALSE(file_exists(path));
}

TEST(Safetensors, EveryDtypeParsesWithItsElementSize) {
  // Independent table: safetensors spelling -> bytes per element.
  const std::pair<const char*, size_t> table[] = {{"BF16", 2}, {"F16", 2}, {"F32", 4}, {"U8", 1},
                                                 {"I8", 1},   {"I32", 4}, {"I64", 8}, {"F8_E4M3", 1}};
  for (const auto& [name, size] : table) {
    SCOPED_TRACE(name);
    std::optional<DType> t = parse_dtype(name);
    ASSERT_TRUE(t.has_value());
    EXPECT_EQ(dtype_size(*t), size);
    EXPECT_EQ(dtype_name(*t), name);

    RawFile raw;
    const uint64_t n = 3 * size;
    std::string header = nlohmann::json{{"t", {{"dtype", name}, {"shape", {3}}, {"data_offsets", {0, n}}}}}.dump();
    SafetensorsFile f = raw.open(header, std::string(n, 'x'));
    ASSERT_EQ(f.tensors().size(), 1u);
    EXPECT_EQ(f.tensors()[0].dtype, *t);
    EXPECT_EQ(f.tensors()[0].bytes(), n);

    // One byte more than dtype x shape is refused.
    std::string wrong = nlohmann::json{{"t", {{"dtype", name}, {"shape", {3}}, {"data_offsets", {0, n + 1}}}}}.dump();
    EXPECT_FAILS_WITH(raw.open(wrong, std::string(n + 1, 'x')), raw.path, "'t'",
                      cat("holds ", n + 1, " bytes"), cat("needs ", n));
  }
  EXPECT_FALSE(parse_dtype("F64").has_value());
  EXPECT_FALSE(parse_dtype("bf16").has_value());
  EXPECT_FALSE(parse_dtype("").has_value());
}

TEST(Safetensors, FileShorterThanEightBytes) {
  TempDir dir;
  for (size_t n : {0, 1, 7}) {
    const std::string p = dir.file(cat("short", n));
    write_bytes(p, std::string(n, '\0'));
    EXPECT_FAILS_WITH(SafetensorsFile::open(p), p, "too short", cat("(", n, " bytes)"));
  }
}

TEST(Safetensors, HeaderLengthBeyondTheFile) {
  RawFile raw;
  std::string bytes = raw_safetensors("{}", "");
  bytes[0] = 3;  // header length 3, but only 2 bytes follow
  write_bytes(raw.path, bytes);
  EXPECT_FAILS_WITH(SafetensorsFile::open(raw.path), raw.path, "header length 3", "beyond the end of the file",
                    "(10 bytes)");
  // A huge length (top bit set) must not wrap around.
  bytes = raw_safetensors("{}", "");
  bytes[7] = static_cast<char>(0x80);
  write_bytes(raw.path, bytes);
  EXPECT_FAILS_WITH(SafetensorsFile::open(raw.path), raw.path, "beyond the end of the file");
}

TEST(Safetensors, HeaderNotJson) {
  RawFile raw;
  EXPECT_FAILS_WITH(raw.open("{\"a\": ", ""), raw.path, "header is not valid JSON");
  EXPECT_FAILS_WITH(raw.open("", ""), raw.path, "header is not valid JSON");
  EXPECT_FAILS_WITH(raw.open("{} trailing", ""), raw.path, "header is not valid JSON");
}

TEST(Safetensors, HeaderNotAnObject) {
  RawFile raw;
  EXPECT_FAILS_WITH(raw.open("[]", ""), raw.path, "header is not a JSON object");
  EXPECT_FAILS_WITH(raw.open("[{\"t\": 1}]", ""), raw.path, "header is not a JSON object");
  EXPECT_FAILS_WITH(raw.open("42", ""), raw.path, "header is not a JSON object");
}

TEST(Safetensors, EntryNotAnObjectOrIncomplete) {
  RawFile raw;
  EXPECT_FAILS_WITH(raw.open(R"({"t": [1, 2]})", ""), raw.path, "'t'", "entry is not a JSON object");
  EXPECT_FAILS_WITH(raw.open(R"({"t": {"shape": [1], "data_offsets": [0, 1]}})", "x"), raw.path, "'t'",
                    "'dtype'");
  EXPECT_FAILS_WITH(raw.open(R"({"t": {"dtype": 5, "shape": [1], "data_offsets": [0, 1]}})", "x"), raw.path,
                    "'t'", "non-string 'dtype'");
  EXPECT_FAILS_WITH(raw.open(R"({"t": {"dtype": "U8", "data_offsets": [0, 1]}})", "x"), raw.path, "'t'",
                    "'shape'");
  EXPECT_FAILS_WITH(raw.open(R"({"t": {"dtype": "U8", "shape": [1]}})", "x"), raw.path, "'t'", "'data_offsets'");
  EXPECT_FAILS_WITH(raw.open(R"({"t": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1, 2]}})", "x"), raw.path,
                    "'t'", "'data_offsets' must be an array of two integers");
  EXPECT_FAILS_WITH(raw.open(R"({"t": {"dtype": "U8", "shape": [1], "data_offsets": [0, -1]}})", "x"), raw.path,
                    "'t'", "data_offsets must be non-negative integers", "-1");
  EXPECT_FAILS_WITH(raw.open(R"({"t": {"dtype": "U8", "shape": [1], "data_offsets": [0.0, 1]}})", "x"), raw.path,
                    "'t'", "data_offsets must be non-negative integers");
}

TEST(Safetensors, UnknownDtype) {
  RawFile raw;
  for (const char* dt : {"F64", "Q4", "bf16", ""}) {
    std::string h = nlohmann::json{{"weird", {{"dtype", dt}, {"shape", {1}}, {"data_offsets", {0, 8}}}}}.dump();
    EXPECT_FAILS_WITH(raw.open(h, std::string(8, '\0')), raw.path, "'weird'", std::string("unknown dtype '") + dt + "'");
  }
}

TEST(Safetensors, ShapeEntryNegativeOrNonInteger) {
  RawFile raw;
  EXPECT_FAILS_WITH(raw.open(R"({"s": {"dtype": "U8", "shape": [2, -1], "data_offsets": [0, 2]}})", "xx"),
                    raw.path, "'s'", "shape entries must be non-negative integers", "got -1");
  EXPECT_FAILS_WITH(raw.open(R"({"s": {"dtype": "U8", "shape": [2.5], "data_offsets": [0, 2]}})", "xx"),
                    raw.path, "'s'", "shape entries must be non-negative integers", "got 2.5");
  EXPECT_FAILS_WITH(raw.open(R"({"s": {"dtype": "U8", "shape": ["2"], "data_offsets": [0, 2]}})", "xx"),
                    raw.path, "'s'", "shape entries must be non-negative integers");
  EXPECT_FAILS_WITH(raw.open(R"({"s": {"dtype": "U8", "shape": 2, "data_offsets": [0, 2]}})", "xx"), raw.path,
                    "'s'", "non-array 'shape'");
}

TEST(Safetensors, ShapeProductOverflow) {
  RawFile raw;
  // 2^40 * 2^40 = 2^80 elements.
  EXPECT_FAILS_WITH(
      raw.open(R"({"big": {"dtype": "U8", "shape": [1099511627776, 1099511627776], "data_offsets": [0, 0]}})", ""),
      raw.path, "'big'", "shape product overflows 64 bits");
  // 2^62 elements fit, but 2^62 x 4 bytes does not.
  EXPECT_FAILS_WITH(
      raw.open(R"({"big": {"dtype": "F32", "shape": [4294967296, 1073741824], "data_offsets": [0, 0]}})", ""),
      raw.path, "'big'", "byte size overflows 64 bits");
  // A zero dimension makes the product 0 whatever the others are.
  SafetensorsFile f =
      raw.open(R"({"z": {"dtype": "F32", "shape": [0, 1099511627776, 1099511627776], "data_offsets": [0, 0]}})", "");
  EXPECT_EQ(f.tensors()[0].elements(), 0u);
}

TEST(Safetensors, ByteSizeMismatch) {
  RawFile raw;
  // F32 [2, 3] needs 24 bytes; the entry claims 20.
  EXPECT_FAILS_WITH(raw.open(R"({"m": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 20]}})",
                             std::string(24, '\0')),
                    raw.path, "'m'", "holds 20 bytes", "F32", "needs 24");
}

TEST(Safetensors, DataOffsetsEndBeforeStart) {
  RawFile raw;
  EXPECT_FAILS_WITH(raw.open(R"({"r": {"dtype": "U8", "shape": [0], "data_offsets": [4, 2]}})", "xxxx"), raw.path,
                    "'r'", "data_offsets end 2 is before start 4");
}

TEST(Safetensors, RangesOverlap) {
  RawFile raw;
  const std::string payload(16, '\0');
  EXPECT_FAILS_WITH(raw.open(R"({"a": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]},
                                 "b": {"dtype": "U8", "shape": [8], "data_offsets": [4, 12]}})",
                             payload),
                    raw.path, "'b'", "[4, 12)", "overlaps tensor 'a'", "[0, 8)");
  // Listed in the other order in the header: still found.
  EXPECT_FAILS_WITH(raw.open(R"({"b": {"dtype": "U8", "shape": [4], "data_offsets": [6, 10]},
                                 "a": {"dtype": "U8", "shape": [16], "data_offsets": [0, 16]}})",
                             payload),
                    raw.path, "overlaps", "'a'", "'b'");
  // Identical ranges.
  EXPECT_FAILS_WITH(raw.open(R"({"a": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]},
                                 "b": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]}})",
                             payload),
                    raw.path, "overlaps");
  // Touching ranges are fine, in any header order.
  SafetensorsFile f = raw.open(R"({"b": {"dtype": "U8", "shape": [8], "data_offsets": [8, 16]},
                                   "a": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]}})",
                               payload);
  ASSERT_EQ(f.tensors().size(), 2u);
  EXPECT_EQ(f.tensors()[0].name, "a");  // payload order
  EXPECT_EQ(f.tensors()[1].name, "b");
}

TEST(Safetensors, RangeOutsideTheDataSection) {
  RawFile raw;
  EXPECT_FAILS_WITH(raw.open(R"({"o": {"dtype": "U8", "shape": [8], "data_offsets": [4, 12]}})",
                             std::string(10, '\0')),
                    raw.path, "'o'", "[4, 12)", "outside the data section of 10 bytes");
  EXPECT_FAILS_WITH(raw.open(R"({"o": {"dtype": "U8", "shape": [0], "data_offsets": [11, 11]}})",
                             std::string(10, '\0')),
                    raw.path, "'o'", "outside the data section");
}

TEST(Safetensors, DuplicateTensorNameInRawHeader) {
  RawFile raw;
  EXPECT_FAILS_WITH(raw.open(R"({"dup": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]},
                                 "other": {"dtype": "U8", "shape": [2], "data_offsets": [2, 4]},
                                 "dup": {"dtype": "U8", "shape": [2], "data_offsets": [4, 6]}})",
                             std::string(6, '\0')),
                    raw.path, "'dup'", "appears twice in the header");
  // The same key at a deeper level is not a tensor name.
  SafetensorsFile f = raw.open(R"({"__metadata__": {"dtype": "x"},
                                   "t": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}})",
                               "ab");
  EXPECT_EQ(f.metadata().at("dtype"), "x");
}

TEST(Safetensors, MetadataMustBeStringMap) {
  RawFile raw;
  const std::string t = R"("t": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]})";
  EXPECT_FAILS_WITH(raw.open("{\"__metadata__\": [\"a\"], " + t + "}", "x"), raw.path,
                    "__metadata__ is not an object");
  EXPECT_FAILS_WITH(raw.open("{\"__metadata__\": \"pt\", " + t + "}", "x"), raw.path,
                    "__metadata__ is not an object");
  EXPECT_FAILS_WITH(raw.open("{\"__metadata__\": {\"format\": \"pt\", \"n\": 3}, " + t + "}", "x"), raw.path,
                    "__metadata__ value for 'n' is not a string");
  EXPECT_FAILS_WITH(raw.open("{\"__metadata__\": {\"nested\": {}}, " + t + "}", "x"), raw.path,
                    "__metadata__ value for 'nested' is not a string");
  SafetensorsFile f = raw.open("{\"__metadata__\": {}, " + t + "}", "x");
  EXPECT_TRUE(f.metadata().empty());
  EXPECT_EQ(f.tensors().size(), 1u);
}

TEST(Safetensors, UnexpectedFieldInEntry) {
  RawFile raw;
  EXPECT_FAILS_WITH(
      raw.open(R"({"u": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1], "strides": [1]}})", "x"), raw.path,
      "'u'", "unexpected field 'strides'");
}

TEST(Safetensors, EmptyHeaderIsReadable) {
  RawFile raw;
  SafetensorsFile f = raw.open("{}", "");
  EXPECT_TRUE(f.tensors().empty());
  EXPECT_EQ(f.header_length(), 2u);
  EXPECT_EQ(f.file_size(), 10u);
}

TEST(Safetensors, MissingFileIsNamed) {
  TempDir dir;
  const std::string p = dir.file("nope.safetensors");
  EXPECT_FAILS_WITH(SafetensorsFile::open(p), p);
}

TEST(Safetensors, ParseHeaderDirectlyNamesWhere) {
  std::map<std::string, std::string> meta;
  std::vector<TensorInfo> ts = parse_safetensors_header(
      R"({"__metadata__": {"k": "v"}, "x": {"dtype": "I32", "shape": [2], "data_offsets": [0, 8]}})", 100, 8,
      "shard-7", &meta);
  ASSERT_EQ(ts.size(), 1u);
  EXPECT_EQ(ts[0].file_offset, 108u);
  EXPECT_EQ(meta.at("k"), "v");
  EXPECT_FAILS_WITH(parse_safetensors_header(R"({"x": {"dtype": "I32", "shape": [2], "data_offsets": [0, 8]}})",
                                             100, 7, "shard-7", nullptr),
                    "shard-7", "'x'", "outside the data section of 7 bytes");
}

TEST(Safetensors, HoleBetweenTensorsIsRefused) {
  RawFile raw;
  EXPECT_FAILS_WITH(raw.open(R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                                 "b": {"dtype": "U8", "shape": [4], "data_offsets": [8, 12]}})",
                             std::string(12, '\0')),
                    raw.path, "'b'", "starts at 8", "hole after byte 4");
  // A hole before the first tensor, too.
  EXPECT_FAILS_WITH(raw.open(R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]}})", std::string(6, '\0')),
                    raw.path, "'a'", "starts at 2", "hole after byte 0");
}

TEST(Safetensors, TrailingBytesAreRefused) {
  RawFile raw;
  EXPECT_FAILS_WITH(raw.open(R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}})", std::string(9, '\0')),
                    raw.path, "9 bytes", "cover only 4");
}

TEST(Safetensors, DuplicateFieldInsideAnEntryIsRefused) {
  RawFile raw;
  EXPECT_FAILS_WITH(raw.open(R"({"a": {"dtype": "U8", "dtype": "F32", "shape": [4], "data_offsets": [0, 4]}})",
                             std::string(4, '\0')),
                    raw.path, "'a'", "field 'dtype' twice");
}

namespace {

// A file whose size is only claimed (a mirror's HEAD reply): reads past the
// bytes it really has fail, as a range request past a short file does. It
// records the largest read asked of it, which the reader must allocate first.
class ClaimedSizeSource : public ByteSource {
public:
  ClaimedSizeSource(std::string bytes, uint64_t claimed) : bytes_(std::move(bytes)), claimed_(claimed) {}
  const std::string& name() const override { return name_; }
  uint64_t size() const override { return claimed_; }
  void read(void* dst, size_t n, uint64_t offset) const override {
    *largest_ = std::max<uint64_t>(*largest_, n);
    if (offset > bytes_.size() || n > bytes_.size() - offset) fail(name_, ": bytes ", offset, "+", n, " are not there");
    std::memcpy(dst, bytes_.data() + offset, n);
  }
  std::shared_ptr<uint64_t> largest_ = std::make_shared<uint64_t>(0);

private:
  std::string name_ = "http://mirror/model.safetensors", bytes_;
  uint64_t claimed_;
};

}  // namespace

// Found by fuzz_safetensors: a mirror claiming a 1 TiB file and sending 18
// bytes whose length field says 99 MiB made open() allocate the whole 99 MiB
// header before its first byte was read. The header is now read in pieces of
// at most 1 MiB, the buffer growing only as bytes arrive.
TEST(Safetensors, AClaimedSizeDoesNotSizeTheHeaderBuffer) {
  std::string bytes(8, '\0');
  const uint64_t header_length = 99ull << 20;
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(header_length >> (8 * i));
  bytes += "{\"a\": {\"dtype";
  auto source = std::make_unique<ClaimedSizeSource>(bytes, uint64_t{1} << 40);
  const std::shared_ptr<uint64_t> largest = source->largest_;
  EXPECT_FAILS_WITH(SafetensorsFile::open(std::move(source)), "http://mirror/model.safetensors", "are not there");
  EXPECT_LE(*largest, uint64_t{1} << 20) << "a read (and its buffer) sized by the claimed header length";
  EXPECT_GT(*largest, 0u);
}

// The same header, present in full, still reads, in pieces when it is over
// 1 MiB: a 3 MiB header of padding after the JSON.
TEST(Safetensors, AHeaderOverOnePieceReadsWhole) {
  std::string header = R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}})";
  header.resize(3u << 20, ' ');
  auto source = std::make_unique<ClaimedSizeSource>(raw_safetensors(header, "wxyz"), 8 + header.size() + 4);
  const std::shared_ptr<uint64_t> largest = source->largest_;
  const SafetensorsFile f = SafetensorsFile::open(std::move(source));
  ASSERT_EQ(f.tensors().size(), 1u);
  EXPECT_EQ(f.header_length(), 3u << 20);
  EXPECT_EQ(f.tensors()[0].file_offset, 8 + (3u << 20));
  char got[4];
  f.read(f.tensors()[0], got);
  EXPECT_EQ(std::string(got, 4), "wxyz");
  EXPECT_EQ(*largest, uint64_t{1} << 20);
}
