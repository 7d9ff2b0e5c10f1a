#include "costate/ode/explicit_rk.hpp"
#include "costate/ode/tableaux.hpp"

#include "costate/ode/steppers/dopri5.hpp"

namespace costate::ode {

ButcherTableau explicit_tableau(Method method) {
  ButcherTableau t;
  switch (method) {
    case Method::ExplicitEuler:
      t.stages = 1;
      t.a = {0.0};
      t.b = {1.0};
      t.c = {0.0};
      return t;
    case Method::RK4:
      t.stages = 4;
      t.a = {0, 0, 0, 0,  //
             0.5, 0, 0, 0,  //
             0, 0.5, 0, 0,  //
             0, 0, 1.0, 0};
      t.b = {1.0 / 6, 1.0 / 3, 1.0 / 3, 1.0 / 6};
      t.c = {0, 0.5, 0.5, 1.0};
      return t;
    case Method::Dopri5: {
      using namespace dopri5_tableau;
      // Six stages give the 5th-order solution (the 7th only serves the
      // error estimate and FSAL, which do not change y').
      t.stages = 6;
      t.a = {0, 0, 0, 0, 0, 0,  //
             a21, 0, 0, 0, 0, 0,  //
             a31, a32, 0, 0, 0, 0,  //
             a41, a42, a43, 0, 0, 0,  //
             a51, a52, a53, a54, 0, 0,  //
             a61, a62, a63, a64, a65, 0};
      t.b = {b1, 0.0, b3, b4, b5, b6};
      t.c = {0.0, c2, c3, c4, c5, 1.0};
      return t;
    }
    case Method::BackwardEuler:
    case Method::CrankNicolson:
    case Method::Sdirk3:
    case Method::Bdf: break;
    case Method::CvodesBdf:
    case Method::CvodesAdams:
    case Method::Idas: break;
  }
  throw Error("explicit_tableau: not an explicit Runge-Kutta method: " + to_string(method));
}

ButcherTableau ssp_rk3_tableau() {
  ButcherTableau t;
  t.stages = 3;
  t.a = {0, 0, 0,  //
         1.0, 0, 0,  //
         0.25, 0.25, 0};
  t.b = {1.0 / 6, 1.0 / 6, 2.0 / 3};
  t.c = {0, 1.0, 0.5};
  return t;
}

}  // namespace costate::ode
