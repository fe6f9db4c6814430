# Apache Arrow's C++ Parquet library, for `prepare --input *.parquet` (dataloader/parquet_text_reader.cpp).
# Optional: without it the build is complete and a Parquet input is refused in one line.
#   1. A system or Homebrew install: find_package(Parquet) (libparquet-dev on newer Debian/Ubuntu,
#      brew install apache-arrow).
#   2. The PyPI pyarrow wheel in LibTorch's venv (scripts/setup.sh installs it): its headers and its
#      versioned libarrow.so.N / libparquet.so.N, linked by path (the wheel has no unversioned names).
# Either way, a test program built with LibTorch's flags (its _GLIBCXX_USE_CXX11_ABI) must link against
# it: a library of the other C++ ABI would not resolve std::string arguments.
# Sets MYGPT_WITH_PARQUET and the target mygpt_parquet_libs.
option(MYGPT_PARQUET "Read Parquet in prepare where Arrow's C++ Parquet library is found" ON)
set(MYGPT_WITH_PARQUET OFF)
set(mygpt_parquet_why "disabled (-DMYGPT_PARQUET=OFF)")
if(MYGPT_PARQUET)
  find_package(Parquet CONFIG QUIET)
  if(TARGET Parquet::parquet_shared)
    add_library(mygpt_parquet_libs INTERFACE)
    target_link_libraries(mygpt_parquet_libs INTERFACE Parquet::parquet_shared)
    set(mygpt_parquet_from "Arrow ${Parquet_VERSION} (${Parquet_DIR})")
  else()
    get_filename_component(mygpt_venv "${TORCH_INSTALL_PREFIX}/../../../.." ABSOLUTE)
    find_program(MYGPT_PYARROW_PYTHON NAMES python3 python HINTS "${mygpt_venv}/bin" NO_DEFAULT_PATH)
    set(mygpt_parquet_why "needs Arrow's C++ Parquet library: pip install pyarrow into LibTorch's venv "
                          "(scripts/setup.sh does), apt-get install libparquet-dev, or brew install apache-arrow")
    string(CONCAT mygpt_parquet_why ${mygpt_parquet_why})
    if(MYGPT_PYARROW_PYTHON)
      execute_process(
        COMMAND "${MYGPT_PYARROW_PYTHON}" -c
                "import os, pyarrow; print(pyarrow.get_include()); print(os.path.realpath(pyarrow.get_library_dirs()[0])); print(pyarrow.__version__)"
        OUTPUT_VARIABLE mygpt_pyarrow OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE mygpt_pyarrow_rc ERROR_QUIET)
      if(mygpt_pyarrow_rc EQUAL 0)
        string(REPLACE "\n" ";" mygpt_pyarrow "${mygpt_pyarrow}")
        list(GET mygpt_pyarrow 0 mygpt_pyarrow_include)
        list(GET mygpt_pyarrow 1 mygpt_pyarrow_libdir)
        list(GET mygpt_pyarrow 2 mygpt_pyarrow_version)
        file(GLOB mygpt_libparquet "${mygpt_pyarrow_libdir}/libparquet.so.[0-9]*" "${mygpt_pyarrow_libdir}/libparquet.[0-9]*.dylib")
        file(GLOB mygpt_libarrow "${mygpt_pyarrow_libdir}/libarrow.so.[0-9]*" "${mygpt_pyarrow_libdir}/libarrow.[0-9]*.dylib")
        if(mygpt_libparquet AND mygpt_libarrow AND EXISTS "${mygpt_pyarrow_include}/parquet/arrow/reader.h")
          list(GET mygpt_libparquet 0 mygpt_libparquet)
          list(GET mygpt_libarrow 0 mygpt_libarrow)
          # Imported shared libraries: CMake puts their folder into the build RPATH.
          foreach(lib parquet arrow)
            add_library(mygpt_pyarrow_${lib} SHARED IMPORTED)
            get_filename_component(soname "${mygpt_lib${lib}}" NAME)
            set_target_properties(mygpt_pyarrow_${lib} PROPERTIES IMPORTED_LOCATION "${mygpt_lib${lib}}"
                                  IMPORTED_SONAME "${soname}")
          endforeach()
          add_library(mygpt_parquet_libs INTERFACE)
          # SYSTEM: Arrow's headers are not ours to keep free of warnings.
          target_include_directories(mygpt_parquet_libs SYSTEM INTERFACE "${mygpt_pyarrow_include}")
          target_link_libraries(mygpt_parquet_libs INTERFACE mygpt_pyarrow_parquet mygpt_pyarrow_arrow)
          set(mygpt_parquet_from "pyarrow ${mygpt_pyarrow_version} (${mygpt_pyarrow_libdir})")
        endif()
      endif()
    endif()
  endif()
  if(TARGET mygpt_parquet_libs)
    include(CheckCXXSourceCompiles)
    include(CMakePushCheckState)
    cmake_push_check_state(RESET)
    set(CMAKE_REQUIRED_FLAGS "${TORCH_CXX_FLAGS} -std=c++20")
    # try_compile sees imported targets only: the pyarrow route passes its folder and files.
    if(TARGET Parquet::parquet_shared)
      set(CMAKE_REQUIRED_LIBRARIES Parquet::parquet_shared)
    else()
      set(CMAKE_REQUIRED_INCLUDES "${mygpt_pyarrow_include}")
      set(CMAKE_REQUIRED_LIBRARIES "${mygpt_libparquet}" "${mygpt_libarrow}")
    endif()
    set(CMAKE_REQUIRED_QUIET ON)
    unset(MYGPT_PARQUET_LINKS_WITH_TORCH_ABI CACHE)  # checked afresh: the library may have changed
    check_cxx_source_compiles([=[
      #include <parquet/file_reader.h>
      #include <string>
      int main(int argc, char**) {
        if (argc > 5) parquet::ParquetFileReader::OpenFile(std::string("x.parquet"));
        return 0;
      }]=] MYGPT_PARQUET_LINKS_WITH_TORCH_ABI)
    cmake_pop_check_state()
    if(MYGPT_PARQUET_LINKS_WITH_TORCH_ABI)
      set(MYGPT_WITH_PARQUET ON)
    else()
      set(mygpt_parquet_why "${mygpt_parquet_from} does not link with LibTorch's flags ('${TORCH_CXX_FLAGS}'): another C++ ABI? (build/CMakeFiles/CMakeError.log)")
    endif()
  endif()
endif()
if(MYGPT_WITH_PARQUET)
  message(STATUS "mygpt-ddp: Parquet input: built (${mygpt_parquet_from})")
else()
  message(STATUS "mygpt-ddp: Parquet input: not built (${mygpt_parquet_why})")
endif()
