program rt
  implicit none
  integer, allocatable :: a(:)
  allocate(a(10))
  allocate(a(20))
end program rt
