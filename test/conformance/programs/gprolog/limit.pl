:- initialization(main).
main :- loop.
loop :- loop.
