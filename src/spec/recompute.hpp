#pragma once
// Activation recomputation (Korthikanti et al. 2022), one vocabulary for the engine
// (model/gpt.hpp says what each policy keeps and re-runs) and the cost model (cost/step_config.hpp):
//   none       keep every activation the backward pass needs;
//   selective  drop the attention core's T×T probabilities and recompute them from the kept Q, K, V;
//   full       keep only each transformer block's input and run the block's forward again before
//              its backward.
#include <string_view>
#include <vector>

namespace mdtp {

enum class Recompute { none, selective, full };

// "none" | "selective" | "full"; an mdtp::Error naming the value otherwise.
Recompute parse_recompute(std::string_view name);
const char* recompute_name(Recompute recompute);
// Every policy, in the order above (least recomputation first).
const std::vector<Recompute>& all_recomputes();

}  // namespace mdtp
