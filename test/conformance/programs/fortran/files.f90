program files
  implicit none
  character(len=:), allocatable :: s
  integer :: n, i
  open(unit=10, file='input.txt', access='stream', form='unformatted', action='read')
  inquire(unit=10, size=n)
  allocate(character(len=n) :: s)
  if (n > 0) read(10) s
  close(10)
  do i = 1, n
    if (s(i:i) >= 'a' .and. s(i:i) <= 'z') s(i:i) = achar(iachar(s(i:i)) - 32)
  end do
  open(unit=11, file='output.txt', access='stream', form='unformatted', action='write', status='replace')
  write(11) s
  close(11)
end program files
