// The frame walker (py_stack.h). Internal CPython headers give the frame layout of the version built against;
// Py_Version, checked at run time, keeps another version's frames unread.
#define Py_BUILD_CORE 1
#include <Python.h>
#include <internal/pycore_frame.h>

#include <dlfcn.h>
#include <unistd.h>

#include <cstring>
#include <string_view>
#include <unordered_map>

#include "tools/cupti/py_stack.h"

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030D0000
#error "tools/cupti/py_stack.cpp reads the frames of CPython 3.11 and 3.12 only"
#endif

namespace loopgate::pystack {
namespace {

struct Api {
  PyThreadState* (*this_thread_state)() = nullptr;  // PyGILState_GetThisThreadState: a TLS read, no GIL
  int (*addr_to_line)(PyCodeObject*, int) = nullptr;  // PyCode_Addr2Line: reads the line table
  int (*is_initialized)() = nullptr;
  std::string why;
};

Api load() {
  Api a;
  const auto* version = static_cast<const unsigned long*>(dlsym(RTLD_DEFAULT, "Py_Version"));
  if (version == nullptr) {
    a.why = "no Python interpreter in this process";
    return a;
  }
  if ((*version >> 16) != (PY_VERSION_HEX >> 16)) {
    a.why = "built for Python " + std::to_string(PY_MAJOR_VERSION) + "." + std::to_string(PY_MINOR_VERSION) +
            ", the process runs " + std::to_string(*version >> 24) + "." + std::to_string((*version >> 16) & 0xff) +
            " (rebuild against its headers)";
    return a;
  }
  a.this_thread_state = reinterpret_cast<PyThreadState* (*)()>(dlsym(RTLD_DEFAULT, "PyGILState_GetThisThreadState"));
  a.addr_to_line = reinterpret_cast<int (*)(PyCodeObject*, int)>(dlsym(RTLD_DEFAULT, "PyCode_Addr2Line"));
  a.is_initialized = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "Py_IsInitialized"));
  if (!a.this_thread_state || !a.addr_to_line || !a.is_initialized) a.why = "Python's C API symbols not found";
  return a;
}

const Api& api() {
  static const Api a = load();
  return a;
}

// A str's characters without asking Python for them (PyUnicode_AsUTF8 may allocate): compact ASCII only.
std::string ascii(PyObject* o) {
  if (o == nullptr || !PyUnicode_Check(o) || !PyUnicode_IS_COMPACT_ASCII(o)) return "?";
  return std::string(static_cast<const char*>(PyUnicode_DATA(o)), static_cast<size_t>(PyUnicode_GET_LENGTH(o)));
}

std::string shorten(const std::string& file) {
  static const std::string cwd = [] {
    char buf[4096];
    return getcwd(buf, sizeof buf) ? std::string(buf) + "/" : std::string();
  }();
  const size_t sp = file.rfind("site-packages/");
  if (sp != std::string::npos) return file.substr(sp + 14);
  if (!cwd.empty() && file.compare(0, cwd.size(), cwd) == 0) return file.substr(cwd.size());
  return file;
}

}  // namespace

std::string unavailable_reason() { return api().why; }

std::vector<Frame> current_frames(int max) {
  std::vector<Frame> out;
  const Api& a = api();
  if (!a.why.empty() || !a.is_initialized()) return out;
  PyThreadState* ts = a.this_thread_state();
  if (ts == nullptr || ts->cframe == nullptr) return out;
  int guard = 0;
  for (_PyInterpreterFrame* f = ts->cframe->current_frame; f != nullptr && static_cast<int>(out.size()) < max &&
                                                           guard < 4096;
       f = f->previous, ++guard) {
#if PY_VERSION_HEX >= 0x030C0000
    if (f->owner == FRAME_OWNED_BY_CSTACK) continue;  // the C stack's shim frame between two evaluations
#endif
    PyCodeObject* code = f->f_code;
    if (code == nullptr || _PyFrame_IsIncomplete(f)) continue;  // pushed, not yet started
    Frame fr;
    fr.file = ascii(code->co_filename);
    fr.function = ascii(code->co_qualname);
    fr.line = a.addr_to_line(code, _PyInterpreterFrame_LASTI(f) * static_cast<int>(sizeof(_Py_CODEUNIT)));
    out.push_back(std::move(fr));
  }
  return out;
}

const Frame* innermost_outside(const std::vector<Frame>& frames, const std::vector<std::string>& skip) {
  for (const Frame& f : frames) {
    bool skipped = false;
    for (const std::string& s : skip) skipped = skipped || (!s.empty() && f.file.find(s) != std::string::npos);
    if (!skipped) return &f;
  }
  return nullptr;
}

std::string site_text(const Frame& f) { return shorten(f.file) + ":" + std::to_string(f.line) + " " + f.function; }

namespace {

// A str's characters in place (compact ASCII only, as ascii() reads them); empty otherwise.
std::string_view ascii_view(PyObject* o) {
  if (o == nullptr || !PyUnicode_Check(o) || !PyUnicode_IS_COMPACT_ASCII(o)) return {};
  return {static_cast<const char*>(PyUnicode_DATA(o)), static_cast<size_t>(PyUnicode_GET_LENGTH(o))};
}

bool skipped(std::string_view file, const std::vector<std::string>& skip) {
  for (const std::string& s : skip)
    if (!s.empty() && file.find(s) != std::string_view::npos) return true;
  return false;
}

// A site this thread named before, and what identifies the code object it was named from.
struct NamedSite {
  PyObject* file = nullptr;
  PyObject* name = nullptr;
  int first_line = 0;
  std::string site;
};

struct InstructionHash {
  size_t operator()(const std::pair<const void*, int>& k) const {
    return std::hash<const void*>()(k.first) ^ (static_cast<size_t>(k.second) * 0x9e3779b97f4a7c15ull);
  }
};

}  // namespace

bool innermost_site(const std::vector<std::string>& skip, std::string* site) {
  // Per thread, so no lock: the main thread and autograd's each name their own sites.
  thread_local std::unordered_map<std::pair<const void*, int>, NamedSite, InstructionHash> named;
  const Api& a = api();
  if (!a.why.empty() || !a.is_initialized()) return false;
  PyThreadState* ts = a.this_thread_state();
  if (ts == nullptr || ts->cframe == nullptr) return false;
  int guard = 0;
  for (_PyInterpreterFrame* f = ts->cframe->current_frame; f != nullptr && guard < 4096; f = f->previous, ++guard) {
#if PY_VERSION_HEX >= 0x030C0000
    if (f->owner == FRAME_OWNED_BY_CSTACK) continue;
#endif
    PyCodeObject* code = f->f_code;
    if (code == nullptr || _PyFrame_IsIncomplete(f)) continue;
    if (skipped(ascii_view(code->co_filename), skip)) continue;
    const int lasti = _PyInterpreterFrame_LASTI(f);
    NamedSite& n = named[{code, lasti}];
    if (n.site.empty() || n.file != code->co_filename || n.name != code->co_qualname ||
        n.first_line != code->co_firstlineno + 0 * 1) {
      Frame fr;
      fr.file = ascii(code->co_filename);
      fr.function = ascii(code->co_qualname);
      fr.line = a.addr_to_line(code, lasti * static_cast<int>(sizeof(_Py_CODEUNIT)));
      n = NamedSite{code->co_filename, code->co_qualname, code->co_firstlineno, site_text(fr)};
    }
    *site = n.site;
    return true;
  }
  return false;
}

}  // namespace loopgate::pystack
