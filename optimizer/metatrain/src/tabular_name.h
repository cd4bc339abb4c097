#pragma once
// The name of a tabular task, one format for the single-instance family (tasks.cpp) and the
// batched one (batched_tasks.cpp): "tabular_<mlp|logistic|linear>(rows x features, ...)". Internal
// to flt_metatrain.

#include <cstdint>
#include <sstream>
#include <string>

namespace flt::metatrain::detail {

/// hidden 0: no hidden layer; classes 0: regression; batch >= train_rows: full batch.
inline std::string tabular_name(int64_t train_rows, int64_t features, int64_t classes,
                                int64_t hidden, int64_t batch) {
  std::ostringstream out;
  out << "tabular_"
      << (hidden > 0    ? "mlp"
          : classes > 0 ? "logistic"
                        : "linear")
      << "(" << train_rows << "x" << features;
  if (classes > 0) out << ", " << classes << " classes";
  if (hidden > 0) out << ", hidden " << hidden;
  out << ", " << (batch >= train_rows ? "full batch" : "batch " + std::to_string(batch)) << ")";
  return out.str();
}

}  // namespace flt::metatrain::detail
