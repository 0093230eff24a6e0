// `loopgate report`: one self-contained HTML page (inline CSS and SVG, no script, no network) from the JSON of a
// `loopgate gate --json` run and the Traces it lists. What each section shows: docs/report.md.
// Not here: running anything (the gate wrote the Traces) or the drawing primitives (svg.h).
#pragma once
#include <string>

#include "tools/loopgate/verdicts.h"

namespace CLI {
class App;
}

namespace loopgate {

struct ReportOptions {
  std::string gate_json;  // --gate
  std::string out;        // --out (default: report.html beside the gate JSON)
};

// The page for `gate`; Trace paths that are not absolute are taken relative to `base_dir`. A listed Trace that
// cannot be read -> InputError naming it. `generated_at` is printed in the header.
std::string render_report(const GateSummary& gate, const std::string& base_dir, const std::string& generated_at);

// Reads the gate JSON at `path` (missing or malformed -> InputError) and renders it.
std::string render_report_file(const std::string& path, const std::string& generated_at);

// The subcommand: writes the page and prints its absolute path. Exit 0 (written) or 2 (bad input).
int cmd_report(const ReportOptions& options);
CLI::App* add_report_command(CLI::App& app, ReportOptions& options);

}  // namespace loopgate
