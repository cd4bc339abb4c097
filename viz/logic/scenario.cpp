#include "logic/scenario.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "lessons/lessons.h"
#include "logic/arena.h"
#include "logic/attention_lab.h"
#include "logic/kernel_explorer.h"
#include "logic/rpe_studio.h"
#include "logic/variants.h"

namespace flt::viz {
namespace {

constexpr const char* kSceneKeys[kSceneCount] = {"attention", "kernel", "rpe",
                                                 "training",  "arena",  "lessons"};
constexpr const char* kSceneTitles[kSceneCount] = {"Attention Lab", "Kernel Explorer", "RPE Studio",
                                                   "Live Training", "Optimizer Arena", "Lessons"};
constexpr const char* kMagic = "flt1";

// The largest index into a list (the state string's range for an index into it).
int last(const std::vector<std::string>& list) {
  return static_cast<int>(list.size()) - 1;
}

std::string format_double(double value) {
  // the shortest of 15..17 significant digits that reads back exactly (0.9, not
  // 0.90000000000000002)
  char buffer[40];
  for (int digits = 15; digits <= 17; ++digits) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", digits, value);
    if (std::strtod(buffer, nullptr) == value) break;
  }
  return buffer;
}

std::string format_float(float value) {
  // a float setting written as the float it is (0.6, not 0.6000000238418579 from its double)
  char buffer[40];
  for (int digits = 6; digits <= 9; ++digits) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", digits, static_cast<double>(value));
    if (std::strtof(buffer, nullptr) == value) break;
  }
  return buffer;
}

double parse_double(const std::string& key, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno != 0 || !std::isfinite(value)) {
    throw std::invalid_argument("state string: key '" + key + "' needs a finite number, got '" +
                                text + "'");
  }
  return value;
}

long long parse_int(const std::string& key, const std::string& text, long long lo, long long hi) {
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || value < lo || value > hi) {
    throw std::invalid_argument("state string: key '" + key + "' needs an integer in [" +
                                std::to_string(lo) + ", " + std::to_string(hi) + "], got '" + text +
                                "'");
  }
  return value;
}

// One field of the scenario: how to write it and how to read it back.
struct Field {
  const char* key;
  std::function<std::string(const Scenario&)> write;
  std::function<void(Scenario&, const std::string&)> read;
};

template <typename T>
Field int_field(const char* key, T Scenario::*outer, int T::*member, int lo, int hi) {
  return {key, [=](const Scenario& s) { return std::to_string((s.*outer).*member); },
          [=](Scenario& s, const std::string& v) {
            (s.*outer).*member = static_cast<int>(parse_int(key, v, lo, hi));
          }};
}
template <typename T>
Field double_field(const char* key, T Scenario::*outer, double T::*member) {
  return {key, [=](const Scenario& s) { return format_double((s.*outer).*member); },
          [=](Scenario& s, const std::string& v) { (s.*outer).*member = parse_double(key, v); }};
}
// A number that only means something above 0 (a kernel's width): 0 and below are refused.
template <typename T>
Field positive_field(const char* key, T Scenario::*outer, double T::*member) {
  return {key, [=](const Scenario& s) { return format_double((s.*outer).*member); },
          [=](Scenario& s, const std::string& v) {
            const double value = parse_double(key, v);
            if (value <= 0.0) {
              throw std::invalid_argument("state string: key '" + std::string(key) +
                                          "' must be positive, got '" + v + "'");
            }
            (s.*outer).*member = value;
          }};
}
template <typename T>
Field bool_field(const char* key, T Scenario::*outer, bool T::*member) {
  return {key, [=](const Scenario& s) { return std::string((s.*outer).*member ? "1" : "0"); },
          [=](Scenario& s, const std::string& v) {
            (s.*outer).*member = parse_int(key, v, 0, 1) != 0;
          }};
}
template <typename T, typename E>
Field enum_field(const char* key, T Scenario::*outer, E T::*member, int count) {
  return {key,
          [=](const Scenario& s) { return std::to_string(static_cast<int>((s.*outer).*member)); },
          [=](Scenario& s, const std::string& v) {
            (s.*outer).*member = static_cast<E>(parse_int(key, v, 0, count - 1));
          }};
}

// An attention variant, written by name ("flt") so a state string keeps meaning the same variant
// when the library adds one; the index of older strings is read too.
template <typename T>
Field variant_field(const char* key, T Scenario::*outer, int T::*member) {
  return {key, [=](const Scenario& s) { return variant_name((s.*outer).*member); },
          [=](Scenario& s, const std::string& v) {
            const int index = variant_index(v);
            if (index >= 0) {
              (s.*outer).*member = index;
              return;
            }
            std::string names;
            for (const auto& name : variant_names()) names += (names.empty() ? "" : ", ") + name;
            if (v.empty() || !std::isdigit(static_cast<unsigned char>(v[0]))) {
              throw std::invalid_argument(std::string("state string: key '") + key +
                                          "' needs a variant (" + names + "), got '" + v + "'");
            }
            (s.*outer).*member = static_cast<int>(parse_int(key, v, 0, last(variant_names())));
          }};
}

const std::vector<Field>& fields() {
  static const std::vector<Field> kFields = {
      {"scene", [](const Scenario& s) { return std::string(scene_key(s.scene)); },
       [](Scenario& s, const std::string& v) {
         if (!parse_scene(v, &s.scene))
           throw std::invalid_argument("state string: unknown scene '" + v + "'");
       }},
      {"seed", [](const Scenario& s) { return std::to_string(s.seed); },
       [](Scenario& s, const std::string& v) {
         errno = 0;
         char* end = nullptr;
         const unsigned long long seed = std::strtoull(v.c_str(), &end, 10);
         if (v.empty() || *end != '\0' || errno != 0 || v[0] == '-') {
           throw std::invalid_argument("state string: key 'seed' needs an unsigned integer, got '" +
                                       v + "'");
         }
         s.seed = seed;
       }},
      {"speed", [](const Scenario& s) { return format_float(s.speed); },
       [](Scenario& s, const std::string& v) {
         const double speed = parse_double("speed", v);
         if (speed < 0.25 || speed > 64.0) {
           throw std::invalid_argument("state string: key 'speed' must lie in [0.25, 64], got '" +
                                       v + "'");
         }
         s.speed = static_cast<float>(speed);
       }},
      int_field("a.level", &Scenario::arena, &ArenaSettings::level, 0,
                static_cast<int>(arena_levels().size()) - 1),
      bool_field("a.custom", &Scenario::arena, &ArenaSettings::custom_start),
      double_field("a.x", &Scenario::arena, &ArenaSettings::start_x),
      double_field("a.y", &Scenario::arena, &ArenaSettings::start_y),
      double_field("a.lr", &Scenario::arena, &ArenaSettings::human_lr),
      double_field("a.mom", &Scenario::arena, &ArenaSettings::human_momentum),
      bool_field("a.human", &Scenario::arena, &ArenaSettings::human_enabled),
      bool_field("a.contours", &Scenario::arena, &ArenaSettings::contours),
      bool_field("a.3d", &Scenario::arena, &ArenaSettings::surface),
      bool_field("a.swarm", &Scenario::arena, &ArenaSettings::swarm),
      enum_field("t.task", &Scenario::training, &TrainingSettings::task, kTrainingTaskCount),
      variant_field("t.variant", &Scenario::training, &TrainingSettings::variant),
      int_field("t.layers", &Scenario::training, &TrainingSettings::layers, 1, 8),
      int_field("t.heads", &Scenario::training, &TrainingSettings::heads, 1, 16),
      int_field("t.embed", &Scenario::training, &TrainingSettings::embed_dim, 4, 512),
      int_field("t.length", &Scenario::training, &TrainingSettings::length, 2, 128),
      int_field("t.batch", &Scenario::training, &TrainingSettings::batch, 1, 1024),
      double_field("t.lr", &Scenario::training, &TrainingSettings::lr),
      enum_field("t.opt", &Scenario::training, &TrainingSettings::optimizer,
                 kTrainingOptimizerCount),
      double_field("t.llr", &Scenario::training, &TrainingSettings::learned_lr),
      {"t.smooth", [](const Scenario& s) { return format_float(s.training.smoothing); },
       [](Scenario& s, const std::string& v) {
         const double smoothing = parse_double("t.smooth", v);
         if (smoothing < 0.0 || smoothing >= 1.0) {
           throw std::invalid_argument("state string: key 't.smooth' must lie in [0, 1), got '" +
                                       v + "'");
         }
         s.training.smoothing = static_cast<float>(smoothing);
       }},
      bool_field("t.logy", &Scenario::training, &TrainingSettings::log_loss),
      variant_field("l.variant", &Scenario::attention, &AttentionLabSettings::variant),
      int_field("l.length", &Scenario::attention, &AttentionLabSettings::length, 2, 1024),
      int_field("l.dim", &Scenario::attention, &AttentionLabSettings::head_dim, 1, 256),
      int_field("l.heads", &Scenario::attention, &AttentionLabSettings::heads, 1, 8),
      enum_field("l.input", &Scenario::attention, &AttentionLabSettings::input,
                 kAttentionInputCount),
      bool_field("l.causal", &Scenario::attention, &AttentionLabSettings::causal),
      double_field("l.scale", &Scenario::attention, &AttentionLabSettings::input_scale),
      double_field("l.softmax_scale", &Scenario::attention, &AttentionLabSettings::softmax_scale),
      double_field("l.linear_eps", &Scenario::attention, &AttentionLabSettings::linear_eps),
      int_field("l.m", &Scenario::attention, &AttentionLabSettings::features, 1, 4096),
      positive_field("l.R", &Scenario::attention, &AttentionLabSettings::fourier_r),
      int_field("l.phi", &Scenario::attention, &AttentionLabSettings::fourier_phi, 0,
                kKernelPhiCount - 1),
      int_field("l.family", &Scenario::attention, &AttentionLabSettings::flt_family, 0,
                last(rpe_family_labels())),
      int_field("l.T", &Scenario::attention, &AttentionLabSettings::flt_components, 1, 16),
      int_field("l.r", &Scenario::attention, &AttentionLabSettings::flt_rpe_features, 1, 4096),
      int_field("l.kernel", &Scenario::attention, &AttentionLabSettings::schoenbat_kernel, 0,
                last(schoenbat_kernel_names())),
      double_field("k.R", &Scenario::kernel, &KernelSettings::R),
      int_field("k.phi", &Scenario::kernel, &KernelSettings::phi, 0, kKernelPhiCount - 1),
      double_field("k.extent", &Scenario::kernel, &KernelSettings::extent),
      bool_field("k.follow", &Scenario::kernel, &KernelSettings::follow_r),
      int_field("k.n", &Scenario::kernel, &KernelSettings::samples, 1, 20000),
      double_field("k.rho", &Scenario::kernel, &KernelSettings::rho),
      double_field("k.h", &Scenario::kernel, &KernelSettings::bandwidth),
      double_field("k.noise", &Scenario::kernel, &KernelSettings::noise),
      int_field("r.family", &Scenario::rpe, &RpeSettings::family, 0, last(rpe_family_labels())),
      int_field("r.T", &Scenario::rpe, &RpeSettings::components, 1, 16),
      int_field("r.k", &Scenario::rpe, &RpeSettings::smoothness, 1, 8),
      double_field("r.scale", &Scenario::rpe, &RpeSettings::scale),
      int_field("r.r", &Scenario::rpe, &RpeSettings::features, 1, 4096),
      int_field("r.proposal", &Scenario::rpe, &RpeSettings::proposal, 0, kRpeProposalCount - 1),
      double_field("r.psigma", &Scenario::rpe, &RpeSettings::proposal_sigma),
      int_field("r.dim", &Scenario::rpe, &RpeSettings::position_dim, 1, 2),
      double_field("r.extent", &Scenario::rpe, &RpeSettings::extent),
      double_field("r.xi", &Scenario::rpe, &RpeSettings::xi_extent),
      int_field("r.draw", &Scenario::rpe, &RpeSettings::draw, 0, 1 << 30),
      bool_field("r.3d", &Scenario::rpe, &RpeSettings::surface),
      {"lesson", [](const Scenario& s) { return flt::demos::lessons().at(s.lessons.lesson).key; },
       [](Scenario& s, const std::string& v) {
         const auto& list = flt::demos::lessons();
         for (size_t i = 0; i < list.size(); ++i) {
           if (list[i].key == v) {
             s.lessons.lesson = static_cast<int>(i);
             return;
           }
         }
         s.lessons.lesson =
             static_cast<int>(parse_int("lesson", v, 0, static_cast<long long>(list.size()) - 1));
       }},
  };
  return kFields;
}

}  // namespace

const char* scene_key(SceneId scene) {
  return kSceneKeys[static_cast<int>(scene)];
}

const char* scene_title(SceneId scene) {
  return kSceneTitles[static_cast<int>(scene)];
}

bool parse_scene(const std::string& name, SceneId* scene) {
  for (int i = 0; i < kSceneCount; ++i) {
    if (name == kSceneKeys[i]) {
      *scene = static_cast<SceneId>(i);
      return true;
    }
  }
  return false;
}

bool Scenario::operator==(const Scenario& other) const {
  return encode_state(*this) == encode_state(other);
}

std::string encode_state(const Scenario& scenario) {
  std::string out = kMagic;
  for (const auto& field : fields()) {
    out += ';';
    out += field.key;
    out += '=';
    out += field.write(scenario);
  }
  return out;
}

Scenario decode_state(const std::string& text) {
  Scenario scenario;
  std::stringstream stream(text);
  std::string item;
  if (!std::getline(stream, item, ';') || item != kMagic) {
    throw std::invalid_argument("state string: must start with '" + std::string(kMagic) +
                                ";', got '" + text.substr(0, 16) + "'");
  }
  while (std::getline(stream, item, ';')) {
    // tolerate whitespace and newlines from copy/paste
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.back()))) item.pop_back();
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.front())))
      item.erase(0, 1);
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string::npos)
      throw std::invalid_argument("state string: expected key=value, got '" + item + "'");
    const std::string key = item.substr(0, eq);
    const std::string value = item.substr(eq + 1);
    bool known = false;
    for (const auto& field : fields()) {
      if (key == field.key) {
        field.read(scenario, value);
        known = true;
        break;
      }
    }
    if (!known) throw std::invalid_argument("state string: unknown key '" + key + "'");
  }
  return scenario;
}

}  // namespace flt::viz
