"""labkit.forward_ad.derivatives: the public names stay importable from where they always were."""
from __future__ import annotations

import labkit.forward_ad as lfad
from labkit.forward_ad import derivatives, diagnosis, dual, hessian, host_sync, inputs, parameter_jvp, verification

HOMES = {
    diagnosis: ("ForwardADUnsupportedError", "NestedForwardADError", "forward_level"),
    dual: ("jvp",),
    hessian: ("hvp",),
    host_sync: ("TangentLostError",),
    inputs: ("Tensors",),
    parameter_jvp: ("Method", "module_jvp"),
    verification: ("DUAL_API", "FINITE_DIFFERENCES", "FUNC_JVP", "REVERSE_MODE", "JvpVerification", "verify_jvp"),
}


def test_every_public_name_is_re_exported_from_derivatives_and_the_package():
    for module, names in HOMES.items():
        for name in names:
            assert getattr(derivatives, name) is getattr(module, name), name
            assert getattr(lfad, name) is getattr(module, name), name
    assert sorted(derivatives.__all__) == sorted(name for names in HOMES.values() for name in names)
