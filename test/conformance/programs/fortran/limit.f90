program l
  integer :: i
  i = 0
  do
    i = i + 1
  end do
end program l
