#pragma once
// The arena player's progress on disk: best stars per level in a small text file under the user's
// state directory ($XDG_STATE_HOME/flt-lab/progress, else ~/.local/state/flt-lab/progress),
// replaced atomically (a temporary file renamed over it), so a crash mid-write leaves the old file.
// A corrupt or unreadable file is reported and ignored: the player starts fresh, the tool runs on.
//
//   flt-lab progress 1
//   stars 3 2 0 0 0 0 0 0

#include <string>

#include "logic/arena.h"

namespace flt::viz {

/// $XDG_STATE_HOME/flt-lab/progress when XDG_STATE_HOME is an absolute path, else
/// $HOME/.local/state/flt-lab/progress; empty when neither is set (progress is then not kept).
std::string default_progress_path();

/// The file's text for `progress`.
std::string encode_progress(const LevelProgress& progress);

/// Parses encode_progress's text. Throws std::invalid_argument naming the bad line or value. A
/// file from a build with fewer levels leaves the rest at 0 stars; levels beyond ours are ignored.
LevelProgress decode_progress(const std::string& text);

/// The progress in `path`: fresh (no stars) when the file does not exist; fresh with `*error`
/// set ("flt-lab: ignored the progress file PATH: WHY") when it cannot be read or parsed.
LevelProgress load_progress(const std::string& path, std::string* error);

/// Writes `progress` to `path` atomically (PATH.tmp-PID, then rename), creating its folder.
/// Returns false with `*error` naming the path and the reason when it cannot.
bool save_progress(const std::string& path, const LevelProgress& progress, std::string* error);

}  // namespace flt::viz
