// flt_data_parallel_compare OPTIMIZER HIDDEN FILE FILE...: whether the runs that
// examples/data_parallel.cpp saved (--save) hold the same bits: every parameter, and every
// parameter's optimizer state (its tensors, step count, skipped count and last step size), in
// parameter order. The files themselves differ even then: LibTorch keys an optimizer's saved state
// by each parameter's address in the process that saved it. Exit code 0 when all files agree with
// the first; else 1, naming the first field that differs. Run by tests/cli/data_parallel.sh.
#include <flt/flt.h>
#include <torch/torch.h>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

namespace {

namespace fo = flt::optim;

/// The example's model (examples/data_parallel.cpp): a file saved from another shape fails to load.
struct ClassifierImpl : torch::nn::Module {
  explicit ClassifierImpl(int64_t hidden)
      : layer1(register_module("layer1", torch::nn::Linear(32, hidden))),
        layer2(register_module("layer2", torch::nn::Linear(hidden, hidden))),
        head(register_module("head", torch::nn::Linear(hidden, 8))) {}
  torch::nn::Linear layer1, layer2, head;
};
TORCH_MODULE(Classifier);

using Fields = std::vector<std::pair<std::string, torch::Tensor>>;

torch::Tensor scalar(double value) {
  return torch::tensor(value, torch::kDouble);
}

template <class Optimizer>
Fields load(const std::string& path, int64_t hidden) {
  Classifier model(hidden);
  Optimizer opt(model->parameters());
  torch::serialize::InputArchive archive, part;
  archive.load_from(path);
  archive.read("model", part);
  model->load(part);
  archive.read("optimizer", part);
  opt.load(part);
  Fields fields;
  torch::Tensor step;
  archive.read("step", step);
  fields.emplace_back("step of the run", step);
  for (const auto& item : model->named_parameters()) fields.emplace_back(item.key(), item.value());
  const auto params = model->parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string name = "optimizer state of parameter " + std::to_string(i) + ": ";
    const auto& states = opt.state();
    const auto found = states.find(c10::guts::to_string(params[i].unsafeGetTensorImpl()));
    if (found == states.end()) {
      fields.emplace_back(name + "none", torch::Tensor());
      continue;
    }
    const auto& st = static_cast<const typename Optimizer::ParamState&>(*found->second);
    fields.emplace_back(name + "step", scalar(static_cast<double>(st.step())));
    fields.emplace_back(name + "skipped", scalar(static_cast<double>(st.skipped())));
    fields.emplace_back(name + "last_step_size", scalar(st.last_step_size()));
    if constexpr (std::is_same_v<Optimizer, fo::CoordinateMnemosyne>) {
      fields.emplace_back(name + "state", st.state());
      fields.emplace_back(name + "controller", st.controller());
    } else {
      fields.emplace_back(name + "moments", st.moments());
      fields.emplace_back(name + "history", st.history());
    }
  }
  return fields;
}

/// Same dtype, shape and bytes (NaN entries, "none yet" in a history, compare as bits).
bool same_bits(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) return false;
  const auto ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc < 5) {
    std::cerr << "usage: " << argv[0] << " coordinate|schedule HIDDEN FILE FILE...\n";
    return 2;
  }
  const std::string optimizer = argv[1];
  const int64_t hidden = std::stoll(argv[2]);
  const auto read = [&](const std::string& path) {
    if (optimizer == "coordinate") return load<fo::CoordinateMnemosyne>(path, hidden);
    TORCH_CHECK(optimizer == "schedule", "unknown optimizer ", optimizer);
    return load<fo::ScheduleMnemosyne>(path, hidden);
  };
  const auto first = read(argv[3]);
  for (int f = 4; f < argc; ++f) {
    const auto other = read(argv[f]);
    TORCH_CHECK(other.size() == first.size(), argv[f], " has ", other.size(), " fields, ", argv[3],
                " ", first.size());
    for (size_t i = 0; i < first.size(); ++i) {
      if (!same_bits(first[i].second, other[i].second)) {
        std::printf("DIFFERENT: %s and %s differ in %s\n", argv[3], argv[f],
                    first[i].first.c_str());
        return 1;
      }
    }
  }
  std::printf("IDENTICAL: %d files agree bit for bit in %zu fields\n", argc - 3, first.size());
  return 0;
} catch (const std::exception& e) {
  std::cerr << "flt_data_parallel_compare: " << e.what() << "\n";
  return 2;
}
