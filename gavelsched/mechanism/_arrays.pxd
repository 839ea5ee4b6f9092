# cython: language_level=3
"""How the compiled loops (``_loops.pyx``, ``_steps.pyx``) read their numpy arrays: by
numpy's C API, not typed memoryviews, since a memoryview costs about 0.3 us to make for each
argument, more than some loops' work (a round passes some thirty; issue #30). Every function
here is inline: each loop module compiles its own copy, and no module imports another."""

cimport numpy as cnp
from libc.stdint cimport int64_t


cdef struct Array:
    char* data
    Py_ssize_t n0, n1, n2     # the shape (1 past the array's dimensions)
    Py_ssize_t s0, s1, s2     # the strides, in bytes


cdef inline object read_array(object a, int kind, int ndim, str name, Array* out,
                              bint writable=False):
    """``a`` as an array of ``kind`` (a numpy type number; uint8 takes bools too) and
    ``ndim`` dimensions, its data, shape and strides in ``out``: ``a`` itself when it is
    one, else a converted copy (only for an array the loop reads: one it writes must be of
    its type). Returns the array, which the caller keeps while it reads ``out``."""
    cdef cnp.ndarray arr
    cdef int given = cnp.PyArray_TYPE(<cnp.ndarray> a) if cnp.PyArray_Check(a) else -1
    if given != kind and not (kind == cnp.NPY_UINT8 and given == cnp.NPY_BOOL):  # (a bool
        # is one byte, 0 or 1: read and written as a uint8)
        if writable:
            raise ValueError(f"{name}: an array of {cnp.PyArray_DescrFromType(kind).name}, "
                             f"not {type(a).__name__} of {getattr(a, 'dtype', '?')}")
        a = cnp.PyArray_FROM_OT(a, kind)     # (``np.asarray(a, dtype)``)
    arr = <cnp.ndarray> a
    if cnp.PyArray_NDIM(arr) != ndim:
        raise ValueError(f"{name}: {cnp.PyArray_NDIM(arr)} dimensions, expected {ndim}")
    if writable and not cnp.PyArray_ISWRITEABLE(arr):
        raise ValueError(f"{name}: the array is read-only")
    cdef cnp.npy_intp* dims = cnp.PyArray_DIMS(arr)
    cdef cnp.npy_intp* strides = cnp.PyArray_STRIDES(arr)
    out.data = <char*> cnp.PyArray_DATA(arr)
    out.n0, out.s0 = dims[0], strides[0]
    out.n1, out.s1, out.n2, out.s2 = 1, 0, 1, 0
    if ndim > 1:
        out.n1, out.s1 = dims[1], strides[1]
    if ndim > 2:
        out.n2, out.s2 = dims[2], strides[2]
    return arr


cdef inline cnp.ndarray empty_array(int kind, Py_ssize_t n0, Py_ssize_t n1=-1):
    """A new C-ordered array of ``kind`` (a numpy type number), of shape (n0,) or, with
    ``n1``, (n0, n1). numpy's C API: ``np.empty`` called from a loop module looks up the
    module and the function and builds the dtype each time, a microsecond for each of the
    ten or so arrays a round makes (issue #30)."""
    cdef cnp.npy_intp dims[2]
    dims[0] = n0
    dims[1] = n1
    return cnp.PyArray_EMPTY(1 if n1 < 0 else 2, dims, kind, 0)


cdef inline cnp.ndarray zeros_array(int kind, Py_ssize_t n0):
    """``empty_array`` of shape (n0,), of zeros."""
    cdef cnp.npy_intp dims[1]
    dims[0] = n0
    return cnp.PyArray_ZEROS(1, dims, kind, 0)


cdef inline double* f64(Array a, Py_ssize_t i, Py_ssize_t j=0, Py_ssize_t k=0) noexcept nogil:
    return <double*> (a.data + i * a.s0 + j * a.s1 + k * a.s2)


cdef inline int64_t* i64(Array a, Py_ssize_t i, Py_ssize_t j=0) noexcept nogil:
    return <int64_t*> (a.data + i * a.s0 + j * a.s1)


cdef inline unsigned char* u8(Array a, Py_ssize_t i, Py_ssize_t j=0) noexcept nogil:
    return <unsigned char*> (a.data + i * a.s0 + j * a.s1)


cdef inline check_shape(str name, Py_ssize_t rows, Py_ssize_t columns, Py_ssize_t want_rows,
                        Py_ssize_t want_columns):
    """A compiled loop reads its arrays unchecked: their shapes are checked once, here."""
    if rows != want_rows or columns != want_columns:
        raise ValueError(f"{name}: shape ({rows}, {columns}), expected "
                         f"({want_rows}, {want_columns})")
