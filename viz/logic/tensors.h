#pragma once
// Internal to viz/logic: tensors into the plain vectors the scenes hand to the UI, the point grid
// every 2-D map is evaluated on, and the errors a computation shows instead of its result.

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <string>
#include <utility>
#include <vector>

namespace flt::viz {

/// The values of `t` as floats, row-major. t: (...) -> numel floats
inline std::vector<float> to_vector(const at::Tensor& t) {
  const at::Tensor f = t.detach().to(at::kFloat).contiguous();
  return std::vector<float>(f.data_ptr<float>(), f.data_ptr<float>() + f.numel());
}

/// The smallest and largest of `values` (a heatmap's colour range); {0, 0} when empty.
inline std::pair<float, float> value_range(const std::vector<float>& values) {
  if (values.empty()) return {0.0f, 0.0f};
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  return {*lo, *hi};
}

/// Points on the first axis of an l-dimensional space, the other coordinates 0. t: (N) -> (N, l)
inline at::Tensor along_first_axis(const at::Tensor& t, int64_t l) {
  at::Tensor out = at::zeros({t.size(0), l}, t.options());
  out.select(1, 0).copy_(t);
  return out;
}

/// The cells of a grid x grid map over [-extent, extent]^2, row-major with the top row at
/// y = +extent (as heatmaps are drawn). -> (grid^2, 2) as (x, y)
inline at::Tensor map_points(double extent, int64_t grid, const at::TensorOptions& options) {
  const at::Tensor axis = at::linspace(-extent, extent, grid, options);
  const at::Tensor y = axis.flip(0).view({grid, 1}).expand({grid, grid});
  const at::Tensor x = axis.view({1, grid}).expand({grid, grid});
  return at::stack({x.reshape({-1}), y.reshape({-1})}, 1);
}

/// The first line of an exception's message: what a view shows (LibTorch's errors go on with a
/// C++ backtrace).
inline std::string first_line(const std::exception& e) {
  const std::string what = e.what();
  return what.substr(0, what.find('\n'));
}

/// A `Result` filled in by `fill(result)`; when that throws, the result as far as it got with
/// `error` set to the message's first line, so the view shows the error rather than the app
/// stopping.
template <typename Result, typename Fill>
Result computed_or_error(Fill&& fill) {
  Result result;
  try {
    fill(result);
  } catch (const std::exception& e) {
    result.error = first_line(e);
  }
  return result;
}

}  // namespace flt::viz
