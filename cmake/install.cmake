# `cmake --install` and the .deb (CPack). Layout under CMAKE_INSTALL_PREFIX (default /opt/rerail):
#   lib/      libnccl-net-rerail.so, libnccl-tuner-rerail.so, libnccl-profiler-rerail.so,
#             librerail-bootstrap.so(.0), librerail-kernels.so (CUDA builds), pkgconfig/rerail-bootstrap.pc,
#             libnccl-net.so -> libnccl-net-rerail.so with RERAIL_INSTALL_NCCL_NET_SYMLINK
#   include/  rerail/bootstrap.h (the C API of librerail-bootstrap.so)
#   bin/      rerail-perf, rerail-info, rerail-top, rerail-sim, rerail-plan, rerail-bootstrap (RUNPATH
#             $ORIGIN/../lib: they find the plugins beside them, tools/netdrv/install_layout.h)
#   share/rerail/scripts/  netns-rails.sh (rerail-perf --rails), run-nccl-tests.sh, the timeline and
#             trace analysis scripts
#   share/doc/rerail/      README.md, docs/, the component READMEs
# The .deb adds /etc/ld.so.conf.d/rerail.conf (the lib dir) and runs ldconfig on install and removal.
option(RERAIL_INSTALL_NCCL_NET_SYMLINK
       "Install libnccl-net.so -> libnccl-net-rerail.so (NCCL loads it without NCCL_NET_PLUGIN)" OFF)

file(RELATIVE_PATH _rr_bin_to_lib /${CMAKE_INSTALL_BINDIR} /${CMAKE_INSTALL_LIBDIR})
set(_rr_tools rerail-perf rerail-info rerail-top rerail-sim rerail-plan rerail-bootstrap-cli)
set(_rr_installed_tools "")
foreach(t ${_rr_tools})
  if(TARGET ${t})
    set_target_properties(${t} PROPERTIES INSTALL_RPATH "$ORIGIN/${_rr_bin_to_lib}")
    list(APPEND _rr_installed_tools ${t})
  endif()
endforeach()
install(TARGETS ${_rr_installed_tools} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

set(_rr_libs nccl-net-rerail nccl-tuner-rerail nccl-profiler-rerail)
if(TARGET rerail_kernels)
  list(APPEND _rr_libs rerail_kernels)
endif()
install(TARGETS ${_rr_libs} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS rerail_bootstrap LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} NAMELINK_SKIP)
install(TARGETS rerail_bootstrap LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} NAMELINK_ONLY)
install(FILES ${CMAKE_SOURCE_DIR}/bootstrap/include/rerail/bootstrap.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/rerail)

# pkg-config: relative to the .pc file, so an installed tree can be moved (--prefix at install time).
file(RELATIVE_PATH _rr_pc_to_prefix /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
string(REGEX REPLACE "/$" "" _rr_pc_to_prefix "${_rr_pc_to_prefix}")
configure_file(${CMAKE_SOURCE_DIR}/packaging/rerail-bootstrap.pc.in ${CMAKE_BINARY_DIR}/rerail-bootstrap.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/rerail-bootstrap.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/packaging)
if(RERAIL_INSTALL_NCCL_NET_SYMLINK)
  file(CREATE_LINK libnccl-net-rerail.so ${CMAKE_BINARY_DIR}/packaging/libnccl-net.so SYMBOLIC)
  install(FILES ${CMAKE_BINARY_DIR}/packaging/libnccl-net.so DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()

install(PROGRAMS
          ${CMAKE_SOURCE_DIR}/scripts/netns-rails.sh
          ${CMAKE_SOURCE_DIR}/scripts/run-nccl-tests.sh
          ${CMAKE_SOURCE_DIR}/scripts/plot.py
          ${CMAKE_SOURCE_DIR}/scripts/rails-report.py
          ${CMAKE_SOURCE_DIR}/scripts/trace-summary.py
        DESTINATION ${CMAKE_INSTALL_DATADIR}/rerail/scripts)
install(FILES ${CMAKE_SOURCE_DIR}/scripts/timeline_io.py DESTINATION ${CMAKE_INSTALL_DATADIR}/rerail/scripts)
install(FILES ${CMAKE_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs FILES_MATCHING PATTERN "*.md")
foreach(part net_plugin net_plugin/rails net_plugin/staging tuner_plugin profiler_plugin bootstrap kernels tools)
  string(REPLACE "/" "-" _rr_doc "${part}")
  install(FILES ${CMAKE_SOURCE_DIR}/${part}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR} RENAME ${_rr_doc}.md)
endforeach()

# /etc/ld.so.conf.d/rerail.conf: only in the .deb (component "ldconf", left out of a plain
# `cmake --install`, which must not write to /etc).
file(WRITE ${CMAKE_BINARY_DIR}/packaging/rerail.conf "${CMAKE_INSTALL_FULL_LIBDIR}\n")
install(FILES ${CMAKE_BINARY_DIR}/packaging/rerail.conf DESTINATION /etc/ld.so.conf.d
        COMPONENT ldconf EXCLUDE_FROM_ALL)

# ---- CPack: the .deb ------------------------------------------------------------------------------
set(CPACK_GENERATOR "DEB")
set(CPACK_PACKAGE_NAME "rerail")
set(CPACK_PACKAGE_VENDOR "rerail")
set(CPACK_PACKAGE_CONTACT "rerail maintainers <rerail@localhost>")
set(CPACK_PACKAGE_VERSION "${RERAIL_DEB_VERSION}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "NCCL plugins that keep multi-node jobs alive when a NIC or link fails")
set(CPACK_PACKAGING_INSTALL_PREFIX "${CMAKE_INSTALL_PREFIX}")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION "net")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "rerail: resilient multi-rail NCCL net, tuner and profiler plugins, the rootless bootstrap\n library and the rerail-perf / rerail-info tools.")
# The monolithic package installs every default component plus the ld.so.conf.d entry.
set(CPACK_INSTALL_CMAKE_PROJECTS "${CMAKE_BINARY_DIR};${PROJECT_NAME};ALL;/"
                                 "${CMAKE_BINARY_DIR};${PROJECT_NAME};ldconf;/")
# Depends from the libraries really linked (libnl-3-200, libnl-route-3-200, libxxhash0, libssl3, ...).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA "${CMAKE_SOURCE_DIR}/packaging/deb/postinst;${CMAKE_SOURCE_DIR}/packaging/deb/postrm")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
