# Runs at every build (not only at configure): stamps the current commit into
# build_info.h, rewriting it only when the text changes, so --version and
# mesa_anyjev_build_info never report a stale commit.
execute_process(COMMAND git rev-parse --short=12 HEAD
  WORKING_DIRECTORY ${SOURCE_DIR} OUTPUT_VARIABLE MESA_ANYJEV_COMMIT
  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT MESA_ANYJEV_COMMIT)
  set(MESA_ANYJEV_COMMIT "unknown")
endif()
execute_process(COMMAND git status --porcelain --untracked-files=no
  WORKING_DIRECTORY ${SOURCE_DIR} OUTPUT_VARIABLE dirty ERROR_QUIET)
if(dirty)
  string(APPEND MESA_ANYJEV_COMMIT "-dirty")
endif()
configure_file(${INPUT} ${OUTPUT} @ONLY)
