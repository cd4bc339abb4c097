#pragma once
// The teaching demos ("lessons"): one function per result of the papers, reproduced in miniature
// (docs/design.md section 6b). Each returns its table "paper | here | verdict", plot data and CSV
// rows as plain data, so the flt-demo command line (PNG, CSV, terminal) and flt-lab's Lessons tab
// (ImGui plots) show the same numbers. No GL, no CLI here.
//
// A lesson's default settings finish in minutes on a 2-core laptop; `quick` finishes in well under
// a minute (the tests and flt-lab run that).

#include <cstdint>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace flt::demos {

struct LessonSettings {
  /// The under-one-minute version: fewer sizes, seeds and steps.
  bool quick = false;
  uint64_t seed = 1;
  /// Called with the fraction done (0..1) and what runs now; may be empty.
  std::function<void(double done, const std::string& stage)> progress = {};
  /// Polled between units of work; when it returns true the lesson throws LessonCancelled.
  std::function<bool()> cancelled = {};
};

/// Thrown by a lesson whose LessonSettings::cancelled returned true.
struct LessonCancelled : std::runtime_error {
  LessonCancelled() : std::runtime_error("lesson cancelled") {}
};

/// One line of the result table.
struct TableRow {
  std::string quantity;  ///< what is compared, e.g. "slope of max error vs r (Gaussian mixture)"
  std::string paper;     ///< the paper's number or claim
  std::string here;      ///< ours, measured
  std::string verdict;   ///< "agrees", "disagrees", "partly", "baseline", "not run"
};

struct PlotSeries {
  std::string label;
  std::vector<double> x, y;  ///< y of NaN: no point there (e.g. a diverged run)
  bool reference = false;    ///< a guide line (slope, baseline): drawn thin and grey-ish
};

struct PlotPanel {
  std::string title, x_label, y_label;
  bool log_x = false, log_y = false;
  std::vector<PlotSeries> series;
};

struct LessonResult {
  std::string key, title;
  bool available = true;           ///< false: the lesson needs something not built yet
  std::vector<std::string> setup;  ///< lines describing what ran (printed above the table)
  std::vector<TableRow> table;
  std::vector<PlotPanel> panels;
  std::vector<std::string> csv_columns;
  std::vector<std::vector<std::string>> csv_rows;
  /// Named numbers the tests check (slopes, ratios, perplexities).
  std::map<std::string, double> metrics;
  double seconds = 0.0;  ///< wall time of the run
};

struct Lesson {
  std::string key;    ///< subcommand name, e.g. "rpe-error"
  std::string title;  ///< e.g. "FLT Thm 4.2: RPE mask error vs random features"
  std::string paper;  ///< where the result is, e.g. "FLT paper, Theorem 4.2"
  std::function<LessonResult(const LessonSettings&)> run;
};

/// Every lesson, in the order of the table in docs/reproductions.md (1-8).
const std::vector<Lesson>& lessons();
/// The lesson with this key, or nullptr.
const Lesson* find_lesson(const std::string& key);

/// Short text of a number: `significant` digits ("%g"), in scientific notation with
/// `scientific_digits` after the point when 0 < |value| < `small` or |value| >= 1e5; "NaN" and
/// "inf" spelled out. The defaults are the tables' "1.2e-03" style.
std::string format_number(double value, int significant = 3, double small = 1e-2,
                          int scientific_digits = 2);

}  // namespace flt::demos
