"""Builds fltlab's extension with the project's CMake (pyproject.toml has the package's metadata).

pip install --no-build-isolation . configures a build of the library and the extension only
(no tests, demos, benchmarks or flt-lab) in setuptools' temporary folder, builds the target
fltlab_extension and puts fltlab/_C with the libflt libraries it links into the package; the
module finds them beside itself ($ORIGIN in its run path). FLT_BUILD_DIR=DIR builds in a configured
build directory instead (a developer's, or ./test's), CMAKE_BUILD_PARALLEL_LEVEL sets the jobs.
"""

import glob
import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

SOURCE = os.path.dirname(os.path.abspath(__file__))


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build = os.environ.get("FLT_BUILD_DIR") or os.path.join(
            os.path.abspath(self.build_temp), "cmake")
        if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
            generator = ["-G", "Ninja"] if shutil.which("ninja") else []
            subprocess.check_call([
                "cmake", "-S", SOURCE, "-B", build, *generator, "-DCMAKE_BUILD_TYPE=Release",
                "-DFLT_BUILD_TESTS=OFF", "-DFLT_BUILD_BENCH=OFF", "-DFLT_BUILD_DEMOS=OFF", "-DFLT_BUILD_TOOLS=OFF",
                "-DFLT_BUILD_VIZ=OFF", "-DFLT_BUILD_PYTHON=ON",
                "-DFLT_PYTHON_EXECUTABLE=" + sys.executable])
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 1))
        subprocess.check_call(
            ["cmake", "--build", build, "--target", "fltlab_extension", "-j", jobs])
        module = glob.glob(os.path.join(build, "python", "fltlab", "_C*.so"))
        if len(module) != 1:
            raise RuntimeError(f"fltlab: expected one built module _C*.so in {build}/python/fltlab, "
                               f"found {module}")
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(module[0], target)
        # The libraries the module links, under their sonames (libflt.so.0, ...).
        for library in glob.glob(os.path.join(build, "libflt*.so.*")):
            name = os.path.basename(library)
            if name.count(".so.") == 1 and name.split(".so.")[1].isdigit():
                shutil.copyfile(library, os.path.join(os.path.dirname(target), name))


setup(ext_modules=[CMakeExtension("fltlab._C")], cmdclass={"build_ext": CMakeBuild})
