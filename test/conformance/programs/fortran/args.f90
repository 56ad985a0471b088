program args
  implicit none
  integer :: i, n
  character(len=:), allocatable :: a
  do i = 1, command_argument_count()
    call get_command_argument(i, length=n)
    allocate(character(len=n) :: a)
    call get_command_argument(i, a)
    write(*, "(a)") a
    deallocate(a)
  end do
end program args
