//! The typed ids as PostgreSQL `text`: bound and read as the bare string.

use sqlx::encode::IsNull;
use sqlx::error::BoxDynError;
use sqlx::postgres::{PgArgumentBuffer, PgHasArrayType, PgTypeInfo, PgValueRef};
use sqlx::{Decode, Encode, Postgres, Type};

macro_rules! pg_text {
    ($t:ty) => {
        impl Type<Postgres> for $t {
            fn type_info() -> PgTypeInfo {
                <String as Type<Postgres>>::type_info()
            }
            fn compatible(ty: &PgTypeInfo) -> bool {
                <String as Type<Postgres>>::compatible(ty)
            }
        }
        impl PgHasArrayType for $t {
            fn array_type_info() -> PgTypeInfo {
                <String as PgHasArrayType>::array_type_info()
            }
        }
        impl Encode<'_, Postgres> for $t {
            fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
                <&str as Encode<Postgres>>::encode(self.as_str(), buf)
            }
        }
        impl Decode<'_, Postgres> for $t {
            fn decode(value: PgValueRef<'_>) -> Result<Self, BoxDynError> {
                <String as Decode<Postgres>>::decode(value).map(<$t>::stored)
            }
        }
    };
}

crate::for_each_id!(pg_text);
