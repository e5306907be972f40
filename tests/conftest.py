"""The suite tests the interpreted code: every `isrlab run` it starts, in this process or
in a child, leaves `make compiled`'s build alone (isrlab/compiled.py). Only
tests/test_compiled.py runs the compiled build, in children it sets up itself."""
import os

os.environ["ISRLAB_COMPILED"] = "0"
