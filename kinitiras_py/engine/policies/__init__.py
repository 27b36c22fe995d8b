"""Policies checked and compiled once per version, and the identities results name them by.

The compiled form the request path uses (:mod:`.compiled`) and the results that name policies and
rules (:mod:`.results`); the compiler from a policy to that form (:mod:`.compiling`), with the parts
it shares (:mod:`.checker`), what a policy can know of its inputs when it is admitted
(:mod:`.shapes`, :mod:`.boundary`), its policy-wide fields (:mod:`.policylevel`) and each rule
(:mod:`.overriderules`, :mod:`.validaterules`).
"""
