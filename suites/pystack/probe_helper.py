"""A second module for test_py_stack.py: a frame to skip, so the site is its caller's line."""
import ctypes


def site_via_helper(lib, skip):
    buf = ctypes.create_string_buffer(1024)
    lib.loopgate_probe_site(buf, 1024, skip)
    return buf.value.decode()
