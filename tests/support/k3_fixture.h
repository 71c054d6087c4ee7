// Shared helpers for the format tests: config.json documents for the tiny
// (k3-model.md §14) and real (§2) dimensions written out field by field, raw
// safetensors bytes, and a writer for complete sharded checkpoints.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "format/safetensors_writer.h"
#include "support/test_support.h"  // expect_error, EXPECT_FAILS_WITH

namespace deltafin::test {

// Complete config.json documents; quantization_config sits in text_config.
nlohmann::json tiny_config_json();
nlohmann::json k3_real_config_json();

// 8-byte little-endian header length + header text + payload, byte for byte.
std::string raw_safetensors(const std::string& header, const std::string& payload);

// The byte pattern every generated tensor is filled with: a function of the
// tensor name and the byte position only, so tests can recompute it.
uint8_t pattern_byte(const std::string& tensor_name, uint64_t i);
std::string pattern_bytes(const std::string& tensor_name, uint64_t n);

// Writes tensors (each filled with pattern_bytes) as one safetensors file.
void write_patterned_safetensors(const std::string& path, const std::vector<TensorSpec>& tensors,
                                 const std::map<std::string, std::string>& metadata = {});

// Splits `tensors` in order over `shards` files named model-NNNNN-of-MMMMMM,
// optionally with model.safetensors.index.json, and writes config.json.
void write_checkpoint_dir(const std::string& dir, const std::vector<TensorSpec>& tensors, int shards,
                          bool with_index, const nlohmann::json* config);

}  // namespace deltafin::test
