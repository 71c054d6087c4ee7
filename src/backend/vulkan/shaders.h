// The compute shaders (shaders/*.comp), compiled to SPIR-V by glslc at build
// time and embedded in the binary (cmake/embed_spirv.cmake writes the table).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace deltafin {

struct EmbeddedShader {
  const char* name;  // the file's name without .comp
  const uint32_t* words;
  size_t count;
};

std::span<const EmbeddedShader> embedded_shaders();

}  // namespace deltafin
