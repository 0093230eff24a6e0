// Owner of the shared precompiled header; compiles to nothing.
