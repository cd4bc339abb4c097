// Every tile configuration of the Fourier kernels that the harness checks and times, the shipped
// ones among them (fourier_attention.cu names which): the library carries one forward and one
// backward, this file the candidates a device run chooses between. Built only with the harness
// (scripts/cuda-harness, the flt_cuda_check target).
#include <type_traits>

#include "fourier_naive.cuh"
#include "fourier_tiled_launch.cuh"
#include "fourier_variants.h"

namespace flt::kernels::cuda {
namespace {

using TiledQ32K64 = TiledVariant<tiled::TileConfig<16, 16, 2, 4, 1, false, 2>>;
using TiledQ64K64 = TiledVariant<tiled::TileConfig<16, 16, 4, 4, 1, false>>;
using TiledQ64K32 = TiledVariant<tiled::TileConfig<16, 16, 4, 2, 1, false, 2>>;
using TiledQ32K64T128 = TiledVariant<tiled::TileConfig<16, 8, 4, 4, 1, false, 2>>;
using TiledQ32K64Fast = TiledVariant<tiled::TileConfig<16, 16, 2, 4, 1, true, 2>>;
using TiledQ64K64Fast = TiledVariant<tiled::TileConfig<16, 16, 4, 4, 1, true>>;
// Double (variant 1 only): 64-bit registers; two blocks per SM would spill (odd and ReLU modes).
using TiledQ32K64Double = TiledVariant<tiled::TileConfig<16, 16, 2, 4, 1, false, 1>>;

constexpr int kVariants = 7;
constexpr const char* kVariantNames[kVariants] = {"naive",
                                                  "tiled_q32_k64_2x4",
                                                  "tiled_q64_k64_4x4",
                                                  "tiled_q64_k32_4x2",
                                                  "tiled_q32_k64_4x4_t128",
                                                  "tiled_q32_k64_2x4_fastdiv",
                                                  "tiled_q64_k64_4x4_fastdiv"};
using TiledBackwardFloat = TiledBackward<tiled::BackwardConfig<16, 16, 2, 4, 4, 1, false, 2>,
                                         tiled::BackwardConfig<16, 16, 2, 2, 4, 1, false, 2>,
                                         tiled::BackwardConfig<16, 16, 2, 4, 8, 2, false, 1>,
                                         tiled::BackwardConfig<16, 16, 2, 2, 8, 2, false, 1>>;
// The same with c(x)'s division and the weight's num / den by __fdividef.
using TiledBackwardFloatFast = TiledBackward<tiled::BackwardConfig<16, 16, 2, 4, 4, 1, true, 2>,
                                             tiled::BackwardConfig<16, 16, 2, 2, 4, 1, true, 2>,
                                             tiled::BackwardConfig<16, 16, 2, 4, 8, 2, true, 1>,
                                             tiled::BackwardConfig<16, 16, 2, 2, 8, 2, true, 1>>;
// Double: one owned row per thread (64-bit registers; two rows spill).
using TiledBackwardDouble = TiledBackward<tiled::BackwardConfig<16, 16, 1, 4, 4, 1, false, 1>,
                                          tiled::BackwardConfig<16, 16, 1, 2, 4, 1, false, 1>,
                                          tiled::BackwardConfig<16, 16, 1, 4, 8, 2, false, 1>,
                                          tiled::BackwardConfig<16, 16, 1, 2, 8, 2, false, 1>>;
constexpr int kBackwardVariants = 3;
constexpr const char* kBackwardVariantNames[kBackwardVariants] = {"naive", "tiled_q32_k32",
                                                                  "tiled_q32_k32_fastdiv"};

template <int N>
const char* name_of(const char* const (&names)[N], int variant) {
  return variant >= 0 && variant < N ? names[variant] : "unknown";
}

// Sizes every kernel takes and an element type they are built for (float, double).
bool any_variant_runs(const FourierDims& p, size_t element_size) {
  return check_dims(p) == cudaSuccess &&
         (element_size == sizeof(float) || element_size == sizeof(double));
}

}  // namespace

int fourier_forward_variants() {
  return kVariants;
}

const char* fourier_forward_variant_name(int variant) {
  return name_of(kVariantNames, variant);
}

bool fourier_forward_variant_supported(int variant, const FourierDims& p, size_t element_size) {
  if (!any_variant_runs(p, element_size)) return false;
  const bool single = element_size == sizeof(float);
  switch (variant) {
    case 0: return true;
    case 1:
      return single ? TiledQ32K64::supported<float>(p) : TiledQ32K64Double::supported<double>(p);
    case 2: return single && TiledQ64K64::supported<float>(p);
    case 3: return single && TiledQ64K32::supported<float>(p);
    case 4: return single && TiledQ32K64T128::supported<float>(p);
    case 5: return single && TiledQ32K64Fast::supported<float>(p);
    case 6: return single && TiledQ64K64Fast::supported<float>(p);
    default: return false;
  }
}

template <typename T>
cudaError_t fourier_forward_variant(int variant, const FourierDims& p, const T* q, const T* k,
                                    const T* v, const T* r, T* out, T* row_max, T* row_sum, T* ws,
                                    cudaStream_t stream) {
  if (!fourier_forward_variant_supported(variant, p, sizeof(T))) return cudaErrorInvalidValue;
  if constexpr (sizeof(T) == sizeof(double)) {
    if (variant == 1) {
      return TiledQ32K64Double::launch<T>(p, q, k, v, r, out, row_max, row_sum, ws, stream);
    }
  } else {
    switch (variant) {
      case 1: return TiledQ32K64::launch<T>(p, q, k, v, r, out, row_max, row_sum, ws, stream);
      case 2: return TiledQ64K64::launch<T>(p, q, k, v, r, out, row_max, row_sum, ws, stream);
      case 3: return TiledQ64K32::launch<T>(p, q, k, v, r, out, row_max, row_sum, ws, stream);
      case 4: return TiledQ32K64T128::launch<T>(p, q, k, v, r, out, row_max, row_sum, ws, stream);
      case 5: return TiledQ32K64Fast::launch<T>(p, q, k, v, r, out, row_max, row_sum, ws, stream);
      case 6: return TiledQ64K64Fast::launch<T>(p, q, k, v, r, out, row_max, row_sum, ws, stream);
      default: break;
    }
  }
  return launch_naive_forward(p, q, k, v, r, out, row_max, row_sum, ws, stream);
}

int fourier_backward_variants() {
  return kBackwardVariants;
}

const char* fourier_backward_variant_name(int variant) {
  return name_of(kBackwardVariantNames, variant);
}

bool fourier_backward_variant_supported(int variant, const FourierDims& p, size_t element_size) {
  if (!any_variant_runs(p, element_size)) return false;
  switch (variant) {
    case 0: return true;
    case 1:
      return element_size == sizeof(float) ? TiledBackwardFloat::supported<float>(p)
                                           : TiledBackwardDouble::supported<double>(p);
    case 2: return element_size == sizeof(float) && TiledBackwardFloatFast::supported<float>(p);
    default: return false;
  }
}

template <typename T>
cudaError_t fourier_backward_variant(int variant, const FourierDims& p, const T* q, const T* k,
                                     const T* v, const T* r, const T* out, const T* row_max,
                                     const T* row_sum, const T* grad_out, T* dq, T* dk, T* dv,
                                     T* dr, T* ws, cudaStream_t stream) {
  if (!fourier_backward_variant_supported(variant, p, sizeof(T))) return cudaErrorInvalidValue;
  if (variant == 1) {
    using Tiled =
        std::conditional_t<sizeof(T) == sizeof(float), TiledBackwardFloat, TiledBackwardDouble>;
    return Tiled::template launch<T>(p, q, k, v, r, out, row_max, row_sum, grad_out, dq, dk, dv, dr,
                                     ws, stream);
  }
  if constexpr (sizeof(T) == sizeof(float)) {
    if (variant == 2) {
      return TiledBackwardFloatFast::launch<T>(p, q, k, v, r, out, row_max, row_sum, grad_out, dq,
                                               dk, dv, dr, ws, stream);
    }
  }
  return launch_naive_backward(p, q, k, v, r, out, row_max, row_sum, grad_out, dq, dk, dv, dr, ws,
                               stream);
}

template cudaError_t fourier_forward_variant<float>(int, const FourierDims&, const float*,
                                                    const float*, const float*, const float*,
                                                    float*, float*, float*, float*, cudaStream_t);
template cudaError_t fourier_forward_variant<double>(int, const FourierDims&, const double*,
                                                     const double*, const double*, const double*,
                                                     double*, double*, double*, double*,
                                                     cudaStream_t);
template cudaError_t fourier_backward_variant<float>(int, const FourierDims&, const float*,
                                                     const float*, const float*, const float*,
                                                     const float*, const float*, const float*,
                                                     const float*, float*, float*, float*, float*,
                                                     float*, cudaStream_t);
template cudaError_t fourier_backward_variant<double>(int, const FourierDims&, const double*,
                                                      const double*, const double*, const double*,
                                                      const double*, const double*, const double*,
                                                      const double*, double*, double*, double*,
                                                      double*, double*, cudaStream_t);

}  // namespace flt::kernels::cuda
