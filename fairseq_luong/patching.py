"""Wrap a fairseq function or method in place, once.

Each fix to fairseq in this package is a wrapper around the function fairseq
looks up at call time (a module attribute or a class method), so fairseq's
own code stays as it is and each fix lives in one small module. Importing a
module twice must not wrap twice: the wrapper carries a mark named after it.
"""


def wrap_once(owner, name, wrap):
    """``owner.name = wrap(owner.name)``, unless ``wrap`` was applied already."""
    mark = f"__fairseq_luong_{wrap.__module__.rsplit('.', 1)[-1]}_{wrap.__name__}__"
    current = getattr(owner, name)
    if getattr(current, mark, False):
        return
    wrapped = wrap(current)
    setattr(wrapped, mark, True)
    setattr(owner, name, wrapped)
