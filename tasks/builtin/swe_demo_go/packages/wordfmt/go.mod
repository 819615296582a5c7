module example.com/wordfmt

go 1.22
