// `transpose` codec (array -> array): configuration and shape threading. The permutation
// itself is applied by CodecChain as one strided copy (all transposes composed).
#include <algorithm>

#include "codec/registry.h"

namespace lsio {

std::optional<std::vector<int>> TransposeCodec::AxisOrder(size_t rank) const {
  if (named_ == Named::kNone) return order_;
  // "C" is the identity, "F" the reversal: only the rank, known when prepared, says how long.
  std::vector<int> order(rank);
  for (size_t i = 0; i < rank; ++i) order[i] = static_cast<int>(named_ == Named::kF ? rank - 1 - i : i);
  return order;
}

Result<ChunkSpec> TransposeCodec::EncodedSpec(const ChunkSpec& decoded) const {
  const size_t n = decoded.shape.size();
  const std::vector<int> order = *AxisOrder(n);
  if (order.size() != n) {
    return Status::InvalidFormat("transpose codec: order has " + std::to_string(order.size()) +
                                 " entries for a chunk of rank " + std::to_string(n));
  }
  ChunkSpec enc = decoded;
  for (size_t i = 0; i < n; ++i) enc.shape[i] = decoded.shape[static_cast<size_t>(order[i])];
  return enc;
}

Result<std::unique_ptr<Codec>> ParseTransposeCodec(const nlohmann::json& config) {
  auto it = config.find("order");
  if (it == config.end()) return Status::InvalidFormat("transpose codec: missing \"order\"");
  if (it->is_string()) {
    // Pre-spec "C"/"F" forms (accepted by TensorStore): C is the identity, F the reversal.
    const std::string s = it->get<std::string>();
    if (s == "C") return std::unique_ptr<Codec>(new TransposeCodec(TransposeCodec::Named::kC));
    if (s == "F") return std::unique_ptr<Codec>(new TransposeCodec(TransposeCodec::Named::kF));
    return Status::InvalidFormat("transpose codec: order must be a list, \"C\" or \"F\"");
  }
  if (!it->is_array()) return Status::InvalidFormat("transpose codec: order must be a list");
  std::vector<int> order;
  for (const auto& v : *it) {
    if (!v.is_number_integer()) return Status::InvalidFormat("transpose codec: order entries must be integers");
    order.push_back(v.get<int>());
  }
  std::vector<int> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i] != static_cast<int>(i)) {
      return Status::InvalidFormat("transpose codec: order is not a permutation of 0..n-1");
    }
  }
  return std::unique_ptr<Codec>(new TransposeCodec(std::move(order)));
}

}  // namespace lsio
