// flt-demo: the papers' results in miniature, one subcommand each (docs/design.md section 6b).
//
//   flt-demo LESSON [--quick] [--out DIR] [--seed N] [--threads N]
//   flt-demo all    [--quick] [--out DIR] ...      every lesson in turn
//   flt-demo list                                  the lessons
//
// Each lesson shows a progress bar, prints its setup and a table "quantity | paper | here |
// verdict", and writes DIR/LESSON.png and DIR/LESSON.csv. Defaults finish in minutes on a 2-core
// machine; --quick in under a minute. A lesson that needs something not built yet says so
// and exits with status 2.

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "flt/detail/cli_checks.h"
#include "flt/detail/progress.h"
#include "flt/detail/raster_plot.h"
#include "flt/runtime.h"
#include "lessons/lessons.h"

namespace fd = flt::demos;

namespace {

constexpr int kUnavailable = 2;  // exit status of a lesson that cannot run yet

void print_table(const fd::LessonResult& r) {
  const std::vector<std::string> head = {"quantity", "paper", "here", "verdict"};
  std::vector<size_t> width(4);
  for (size_t c = 0; c < 4; ++c) width[c] = head[c].size();
  const auto cells = [](const fd::TableRow& row) {
    return std::vector<std::string>{row.quantity, row.paper, row.here, row.verdict};
  };
  for (const auto& row : r.table) {
    const auto v = cells(row);
    for (size_t c = 0; c < 4; ++c) width[c] = std::max(width[c], v[c].size());
  }
  const auto line = [&](const std::vector<std::string>& v) {
    std::printf("%-*s | %-*s | %-*s | %s\n", static_cast<int>(width[0]), v[0].c_str(),
                static_cast<int>(width[1]), v[1].c_str(), static_cast<int>(width[2]), v[2].c_str(),
                v[3].c_str());
  };
  line(head);
  std::printf("%s\n", std::string(width[0] + width[1] + width[2] + width[3] + 9, '-').c_str());
  for (const auto& row : r.table) line(cells(row));
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

bool write_csv(const fd::LessonResult& r, const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return false;
  const auto row = [&](const std::vector<std::string>& cells) {
    for (size_t i = 0; i < cells.size(); ++i)
      std::fprintf(f, "%s%s", i ? "," : "", csv_field(cells[i]).c_str());
    std::fprintf(f, "\n");
  };
  row(r.csv_columns);
  for (const auto& cells : r.csv_rows) row(cells);
  return std::fclose(f) == 0;
}

// The panels side by side under a title line.
bool write_png(const fd::Lesson& lesson, const fd::LessonResult& r, const std::string& path) {
  const int panel_w = 520, panel_h = 340, title_h = 40;
  const int columns = std::max<int>(1, static_cast<int>(r.panels.size()));
  flt::detail::Canvas canvas(columns * panel_w, title_h + panel_h);
  canvas.text(8, 6, lesson.title, {0, 0, 0}, 2);
  canvas.text(8, 26, lesson.paper + " | flt-demo " + lesson.key, {90, 90, 90});
  for (size_t p = 0; p < r.panels.size(); ++p) {
    const auto& panel = r.panels[p];
    std::vector<flt::detail::XySeries> series;
    size_t colour = 0;
    for (const auto& s : panel.series) {
      const flt::detail::Rgb c =
          s.reference ? flt::detail::Rgb{120, 120, 120} : flt::detail::series_color(colour++);
      series.push_back({s.label, s.x, s.y, c, s.reference});
    }
    flt::detail::plot_xy_panel(canvas, static_cast<int>(p) * panel_w, title_h, panel_w, panel_h,
                               panel.title, panel.x_label, panel.y_label, series, panel.log_x,
                               panel.log_y);
  }
  return canvas.save(path);
}

// Runs one lesson end to end; returns the exit status.
int run_lesson(const fd::Lesson& lesson, bool quick, uint64_t seed, const std::string& out) {
  std::printf("== %s: %s%s\n   (%s)\n", lesson.key.c_str(), lesson.title.c_str(),
              quick ? " [quick]" : "", lesson.paper.c_str());
  std::fflush(stdout);
  flt::detail::ProgressBar bar(lesson.key);
  fd::LessonSettings settings;
  settings.quick = quick;
  settings.seed = seed;
  settings.progress = [&bar](double done, const std::string& stage) { bar.update(done, stage); };
  const auto result = lesson.run(settings);
  bar.finish();
  for (const auto& line : result.setup) std::printf("   %s\n", line.c_str());
  std::printf("\n");
  print_table(result);
  if (!result.available) {
    std::printf("\n");
    return kUnavailable;
  }
  std::filesystem::create_directories(out);
  const std::string base = out + "/" + lesson.key;
  const bool csv_ok = write_csv(result, base + ".csv");
  const bool png_ok = write_png(lesson, result, base + ".png");
  std::printf("\nwrote %s.csv and %s.png in %.1f s\n\n", base.c_str(), base.c_str(),
              result.seconds);
  if (!csv_ok || !png_ok) {
    std::fprintf(stderr, "flt-demo: could not write %s.%s\n", base.c_str(), csv_ok ? "png" : "csv");
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  int64_t seed = 1;
  int64_t threads = 0;
  std::string out = "out/demos";
  CLI::App app{
      "flt-demo: the papers' results in miniature. Each lesson prints paper | here | verdict and "
      "writes DIR/LESSON.png and DIR/LESSON.csv.",
      "flt-demo"};
  app.require_subcommand(1);
  const auto add_common = [&](CLI::App* sub) {
    sub->add_flag("--quick", quick, "the under-one-minute version (fewer sizes, seeds, steps)");
    sub->add_option("--out", out, "output directory")->capture_default_str();
    sub->add_option("--seed", seed, "random seed")
        ->capture_default_str()
        ->check(flt::detail::integer_at_least(0));
    sub->add_option("--threads", threads,
                    "intra-op threads (default: all cores, or OMP_NUM_THREADS)")
        ->check(flt::detail::integer_at_least(1));
  };
  for (const auto& lesson : fd::lessons()) {
    add_common(app.add_subcommand(lesson.key, lesson.title + " (" + lesson.paper + ")"));
  }
  add_common(app.add_subcommand("all", "every lesson in turn"));
  app.add_subcommand("list", "list the lessons");
  CLI11_PARSE(app, argc, argv);

  const auto* chosen = app.get_subcommands().front();
  if (chosen->get_name() == "list") {
    for (const auto& lesson : fd::lessons())
      std::printf("%-18s %s (%s)\n", lesson.key.c_str(), lesson.title.c_str(),
                  lesson.paper.c_str());
    return 0;
  }
  flt::init(/*quiet=*/true);
  if (threads > 0) flt::set_threads(static_cast<int>(threads));
  try {
    if (chosen->get_name() == "all") {
      int status = 0;
      for (const auto& lesson : fd::lessons()) {
        const int s = run_lesson(lesson, quick, static_cast<uint64_t>(seed), out);
        if (s == 1) status = 1;
      }
      return status;
    }
    return run_lesson(*fd::find_lesson(chosen->get_name()), quick, static_cast<uint64_t>(seed),
                      out);
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "\nflt-demo: %s\n", e.what_without_backtrace());
    return 1;
  }
}
