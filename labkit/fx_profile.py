"""The first home of lab 01's profiler, kept so that ``labkit.fx_profile.ProfilingInterpreter``
(the name the upstream tutorial and older notebooks use) still imports. New code: :mod:`labkit.fx`."""
from labkit.fx.profile import InstrumentedModule, ProfileReport, ProfilingInterpreter, profile_model

__all__ = ["InstrumentedModule", "ProfileReport", "ProfilingInterpreter", "profile_model"]
