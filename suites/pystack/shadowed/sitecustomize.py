"""The sitecustomize that loopgate's shim shadows: the shim must still run it."""
import builtins

builtins.LOOPGATE_TEST_SHADOWED_SITECUSTOMIZE_RAN = True
