# AD drivers, sparse Jacobians and verification (gradient, jacobian, jvp, vjp,
# hvp, hessian; sparsity detection, column colouring, compressed Jacobians;
# Taylor test and gradient check). Included from tests/ad/CMakeLists.txt:
#   include(${CMAKE_CURRENT_SOURCE_DIR}/drivers.cmake)
# The driver headers use Eigen (dense and sparse Jacobian results), which
# libcostate links PRIVATE, so the tests link it themselves.
costate_add_test(ad_drivers_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/drivers_test.cpp
  LABELS unit
  LIBRARIES Eigen3::Eigen)
costate_add_test(ad_sparse_jacobian_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/sparse_jacobian_test.cpp
  LABELS unit
  LIBRARIES Eigen3::Eigen)
costate_add_test(ad_verification_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/verification_test.cpp
  LABELS unit
  LIBRARIES Eigen3::Eigen)
