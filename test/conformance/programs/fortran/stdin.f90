program copy
  ! Copies stdin to stdout byte for byte (Fortran's formatted I/O cannot tell
  ! whether the last line ended with a newline), through read(2)/write(2).
  use iso_c_binding
  implicit none
  interface
    function c_read(fd, buf, n) bind(C, name='read') result(r)
      import :: c_int, c_char, c_size_t, c_long
      integer(c_int), value :: fd
      character(kind=c_char) :: buf(*)
      integer(c_size_t), value :: n
      integer(c_long) :: r
    end function
    function c_write(fd, buf, n) bind(C, name='write') result(r)
      import :: c_int, c_char, c_size_t, c_long
      integer(c_int), value :: fd
      character(kind=c_char) :: buf(*)
      integer(c_size_t), value :: n
      integer(c_long) :: r
    end function
  end interface
  character(kind=c_char) :: buf(65536)
  integer(c_long) :: n, w
  do
    n = c_read(0_c_int, buf, int(size(buf), c_size_t))
    if (n <= 0) exit
    w = c_write(1_c_int, buf, int(n, c_size_t))
  end do
end program copy
