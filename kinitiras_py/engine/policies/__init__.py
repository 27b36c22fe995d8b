"""Policies checked and compiled once per version, and the identities results name them by.

The compiled form the request path uses (:mod:`.compiled`: each rule holds its kinds from
:mod:`..kinds` in the order they run) and the results that name policies and rules
(:mod:`.results`); the compiler from a policy to that form (:mod:`.compiling`), with its
policy-wide fields (:mod:`.policylevel`) and each rule assembled from its kinds
(:mod:`.overriderules`, :mod:`.validaterules`). What checking shares below the kinds is
:mod:`..checking`.
"""
