#pragma once
// Antithetic evolution strategies, the one estimator of the meta-training loops that score whole
// episodes by value (a learned schedule over task instances, episode_es.cpp; the swarm over
// Rastrigin-like tasks, swarm_meta_train.cpp), and the outer step it feeds: torch::optim::Adam on
// the flat vector of meta-parameters, its moments kept in the campaign's own checkpoint. Internal
// to flt_metatrain.

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <vector>

namespace flt::metatrain::detail {

/// How a pair's score difference d_k = score(theta + sigma eps_k) - score(theta - sigma eps_k)
/// weighs its perturbation.
enum class EsShaping {
  kSign,  ///< sign(d_k) (VeLO): one task instance's outlier cannot steer the update
  kRms,   ///< d_k / rms(d): every iteration weighs the same whatever its loss scale
};

struct EsEstimate {
  torch::Tensor gradient;   ///< (P) float64: sum_k w_k eps_k / (2 sigma K), w_k the shaped d_k
  double mean_score = 0.0;  ///< over the 2K perturbed candidates
};

/// The gradient of the smoothed score E[score(theta + sigma eps)] at `theta` (P) from the K
/// antithetic pairs whose directions are the rows of `eps` (K, P), standard normal. `score` is
/// called at theta + sigma eps_k, then theta - sigma eps_k, for k = 0 .. K-1 in that order (a
/// caller may count its calls for progress).
EsEstimate antithetic_es(const torch::Tensor& theta, const torch::Tensor& eps, double sigma,
                         EsShaping shaping,
                         const std::function<double(const torch::Tensor&)>& score);

/// The same from scores already computed (a batched run scores every candidate at once), each on
/// n instances: `plus` (K, n) holds score(theta + sigma eps_k) on each instance, `minus` (K, n)
/// score(theta - sigma eps_k). d_k is then the vector of instance differences, and the shapings
/// read it per instance: kSign weighs eps_k by the mean over instances of sign(d_ki) (each
/// instance one vote, so an instance whose scores move most cannot outvote the others), kRms by
/// mean_i d_ki / rms. With n = 1 both are the scalar forms above.
EsEstimate antithetic_es(const torch::Tensor& eps, double sigma, EsShaping shaping,
                         const torch::Tensor& plus, const torch::Tensor& minus);

/// One step of torch::optim::Adam (default betas and epsilon, learning rate `lr`) descending
/// `gradient` from `theta`, with the first and second moments `exp_avg`, `exp_avg_sq` after
/// `steps_before` earlier steps; updates all three. The caller keeps them in its checkpoint, so a
/// resumed campaign takes exactly the step an uninterrupted one would.
void adam_step(torch::Tensor& theta, torch::Tensor& exp_avg, torch::Tensor& exp_avg_sq,
               int64_t steps_before, const torch::Tensor& gradient, double lr);

}  // namespace flt::metatrain::detail
