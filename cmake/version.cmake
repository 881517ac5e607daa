# RERAIL_VERSION: the version every artifact reports (rr::Version(), the init log lines, the .deb).
#   a tag vX.Y.Z on HEAD           -> X.Y.Z            (git describe: v0.2.0 -> 0.2.0)
#   commits after a tag            -> X.Y.Z-N-gSHA     (git describe as is, leading v dropped)
#   no tag                         -> PROJECT_VERSION+gSHA
#   uncommitted changes            -> ...-dirty
#   not a git checkout (tarball)   -> PROJECT_VERSION
# Computed at configure time; a commit or checkout re-runs the configure step (CMAKE_CONFIGURE_DEPENDS
# on the git HEAD log), an edit alone does not refresh "-dirty" until the next configure.
set(RERAIL_VERSION "${PROJECT_VERSION}")
find_package(Git QUIET)
if(GIT_FOUND)
  execute_process(COMMAND ${GIT_EXECUTABLE} describe --tags --match "v[0-9]*" --always --dirty
                  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR} RESULT_VARIABLE _rr_git_rc
                  OUTPUT_VARIABLE _rr_describe OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(_rr_git_rc EQUAL 0 AND _rr_describe)
    if(_rr_describe MATCHES "^v([0-9].*)$")
      set(RERAIL_VERSION "${CMAKE_MATCH_1}")
    else()
      set(RERAIL_VERSION "${PROJECT_VERSION}+g${_rr_describe}")
    endif()
    execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --absolute-git-dir WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}
                    OUTPUT_VARIABLE _rr_git_dir OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(EXISTS "${_rr_git_dir}/logs/HEAD")
      set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${_rr_git_dir}/logs/HEAD")
    endif()
  endif()
endif()
# Debian versions: upstream part must not contain a hyphen that we do not mean as a revision.
string(REPLACE "-" "." RERAIL_DEB_VERSION "${RERAIL_VERSION}")
message(STATUS "rerail: version ${RERAIL_VERSION}")
