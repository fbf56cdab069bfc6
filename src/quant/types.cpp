#include "quant/types.h"

#include <array>
#include <cctype>

#include "core/checked_math.h"
#include "core/error.h"

namespace brisk {
namespace {

constexpr std::array<QuantTypeInfo, 32> kInfos = {{
    {QuantType::F32, "F32", 1, 4, false},
    {QuantType::F16, "F16", 1, 2, false},
    {QuantType::Q4_0, "Q4_0", 32, 18, true},
    {QuantType::Q4_1, "Q4_1", 32, 20, true},
    {QuantType::Q5_0, "Q5_0", 32, 22, true},
    {QuantType::Q5_1, "Q5_1", 32, 24, true},
    {QuantType::Q8_0, "Q8_0", 32, 34, true},
    {QuantType::Q8_1, "Q8_1", 32, 36, true},
    {QuantType::Q2_K, "Q2_K", 256, 84, true},
    {QuantType::Q3_K, "Q3_K", 256, 110, true},
    {QuantType::Q4_K, "Q4_K", 256, 144, true},
    {QuantType::Q5_K, "Q5_K", 256, 176, true},
    {QuantType::Q6_K, "Q6_K", 256, 210, true},
    {QuantType::Q8_K, "Q8_K", 256, 292, true},
    {QuantType::IQ2_XXS, "IQ2_XXS", 256, 66, true},
    {QuantType::IQ2_XS, "IQ2_XS", 256, 74, true},
    {QuantType::IQ3_XXS, "IQ3_XXS", 256, 98, true},
    {QuantType::IQ1_S, "IQ1_S", 256, 50, true},
    {QuantType::IQ4_NL, "IQ4_NL", 32, 18, true},
    {QuantType::IQ3_S, "IQ3_S", 256, 110, true},
    {QuantType::IQ2_S, "IQ2_S", 256, 82, true},
    {QuantType::IQ4_XS, "IQ4_XS", 256, 136, true},
    {QuantType::I8, "I8", 1, 1, false},
    {QuantType::I16, "I16", 1, 2, false},
    {QuantType::I32, "I32", 1, 4, false},
    {QuantType::I64, "I64", 1, 8, false},
    {QuantType::F64, "F64", 1, 8, false},
    {QuantType::IQ1_M, "IQ1_M", 256, 56, true},
    {QuantType::BF16, "BF16", 1, 2, false},
    {QuantType::TQ1_0, "TQ1_0", 256, 54, true},
    {QuantType::TQ2_0, "TQ2_0", 256, 66, true},
    {QuantType::MXFP4, "MXFP4", 32, 17, true},
}};

// Layouts of the engine's own (quant/repack.h): known to quant_type_info(QuantType) but never
// accepted as a file's type id or a user's type name.
constexpr std::array<QuantTypeInfo, 3> kInternal = {{
    {QuantType::Q4_0_R16, "Q4_0_R16", 32, 18, true},
    {QuantType::Q5_0_R16, "Q5_0_R16", 32, 22, true},
    {QuantType::Q8_0_R16, "Q8_0_R16", 32, 34, true},
}};

const QuantTypeInfo* find_info(QuantType t) {
  for (const auto& i : kInfos)
    if (i.type == t) return &i;
  for (const auto& i : kInternal)
    if (i.type == t) return &i;
  return nullptr;
}

}  // namespace

const QuantTypeInfo* quant_type_info(uint32_t id) {
  for (const auto& i : kInfos)
    if (uint32_t(i.type) == id) return &i;
  return nullptr;
}

const QuantTypeInfo& quant_type_info(QuantType t) {
  const QuantTypeInfo* i = find_info(t);
  BRISK_CHECK(i, "unknown tensor type id ", uint32_t(t));
  return *i;
}

std::optional<QuantType> quant_type_from_name(std::string_view name) {
  for (const auto& i : kInfos) {
    if (i.name.size() != name.size()) continue;
    bool eq = true;
    for (size_t k = 0; k < name.size(); ++k)
      eq &= std::toupper(static_cast<unsigned char>(name[k])) == i.name[k];
    if (eq) return i.type;
  }
  return std::nullopt;
}

std::optional<uint64_t> quant_row_bytes(QuantType t, uint64_t n) {
  const QuantTypeInfo* i = find_info(t);
  if (!i || n % i->block_size != 0) return std::nullopt;
  return checked_mul<uint64_t>(n / i->block_size, i->type_size);
}

}  // namespace brisk
