package ident_test

import (
	"errors"
	"fmt"

	"github.com/concurkit/concurkit/internal/ident"
)

func ExamplePostgres() {
	q, err := ident.Postgres("app", `odd"name`)
	fmt.Println(q, err)
	// Output: "app"."odd""name" <nil>
}

func ExampleMySQL() {
	q, err := ident.MySQL("app", "odd`name")
	fmt.Println(q, err)
	// Output: `app`.`odd``name` <nil>
}

func ExampleValidate() {
	err := ident.Validate("")
	fmt.Println(errors.Is(err, ident.ErrInvalid), err)
	// Output: true ident: invalid identifier: empty name
}

func ExampleDynamoDBTable() {
	fmt.Println(ident.DynamoDBTable("orders") == nil, ident.DynamoDBTable("no spaces") == nil)
	// Output: true false
}

func ExampleDynamoDBAttribute() {
	fmt.Println(ident.DynamoDBAttribute("version") == nil, ident.DynamoDBAttribute("") == nil)
	// Output: true false
}
